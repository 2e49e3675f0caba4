// plan_decode: validates the cache configuration and options once on the host, then picks the
// chunk policy and sizes the workspace for the cache's device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "attention/chunks.h"
#include "attention/workspace.h"
#include "common/validate.h"
#include "turbodecode/attention.h"

#ifdef TURBODECODE_WITH_CUDA
#include "attention/cuda/decode_cuda.h"
#endif

namespace turbodecode {
namespace {

// CPU chunk policy (choice): a chunk covers at least 512 positions, and a long row is cut into
// at most 17 (16 when its first position falls on a chunk boundary): enough work items for a
// many-core host even at batch 1 with few KV heads. The constants do not depend on the thread
// count, so results never do either.
constexpr attention::ChunkLimits kCpuChunkLimits{512, 17, 512};
// Upper bound of any row's chunk count with fixed_chunk_positions: keeps the workspace a plan
// asks for sane.
constexpr std::int64_t kMaxFixedChunks = 4096;
// Query head rows one run may hold: keeps the workspace size within int64 for every chunk
// count and head dim.
constexpr std::int64_t kMaxQueryRows = std::int64_t{1} << 24;

// The most positions any row of this cache and mask sees.
std::int64_t longest_visible(const KvCacheConfig& cache, const DecodeOptions& options) {
  const bool windowed = options.mask != MaskKind::causal && options.sliding_window > 0;
  return windowed ? std::min(cache.capacity, options.sliding_window) : cache.capacity;
}

// Chunks of a row that sees `visible` positions in chunks of `c`, at worst (SPEC §2.8: its
// first position need not fall on a chunk boundary).
std::int64_t worst_chunk_count(std::int64_t visible, std::int64_t c) {
  return (visible + c - 1) / c + 1;
}

void validate_query_tokens(const KvCacheConfig& cache, const DecodeOptions& options) {
  check_arg(options.query_tokens >= 1 && options.query_tokens <= kMaxQueryTokens,
            "options.query_tokens", "must be in [1, " + std::to_string(kMaxQueryTokens) + "]");
  if (cache.kind != LayerKind::ring || options.query_tokens == 1) return;
  // The later tokens of a draft overwrite ring rows; the rows its earlier tokens see must
  // survive them.
  check_arg(options.sliding_window > 0, "options.query_tokens",
            "above 1 on a ring layer needs options.sliding_window > 0");
  check_arg(cache.capacity >= options.sliding_window + options.query_tokens - 1,
            "options.query_tokens",
            "needs capacity (" + std::to_string(cache.capacity) +
                ") >= options.sliding_window + options.query_tokens - 1 on a ring layer");
}

void validate_fixed_chunks(const KvCacheConfig& cache, const DecodeOptions& options) {
  const std::int64_t c = options.fixed_chunk_positions;
  check_arg(c >= 0 && c % 32 == 0, "options.fixed_chunk_positions",
            "must be 0 (automatic) or a positive multiple of 32");
  if (c == 0) return;
  check_arg(worst_chunk_count(longest_visible(cache, options), c) <= kMaxFixedChunks,
            "options.fixed_chunk_positions",
            "leaves a row more than " + std::to_string(kMaxFixedChunks) + " chunks");
}

void validate_options(const KvCacheConfig& cache, const DecodeOptions& options,
                      std::int64_t max_queries) {
  check_arg(options.n_heads > 0, "options.n_heads", "must be positive");
  check_arg(options.n_heads % cache.n_kv_heads == 0, "options.n_heads",
            "must be a multiple of n_kv_heads (" + std::to_string(cache.n_kv_heads) + ")");
  switch (options.mask) {
    case MaskKind::causal:
    case MaskKind::sliding_linear:
      check_arg(cache.kind == LayerKind::linear, "options.mask",
                "causal and sliding_linear masks need a linear cache");
      break;
    case MaskKind::sliding_ring:
      check_arg(cache.kind == LayerKind::ring, "options.mask",
                "the sliding_ring mask needs a ring cache");
      break;
    default:
      check_arg(false, "options.mask", "must be causal, sliding_ring or sliding_linear");
  }
  check_arg(options.sliding_window >= 0, "options.sliding_window", "must be >= 0");
  // The formats the scores read on both backends (the CUDA kernel has tensor-core tiles for
  // these; narrower TQ codes would cost K too much fidelity to be worth a tile of their own).
  check_arg(cache.k_format == RowFormat::f16 || cache.k_format == RowFormat::fp8 ||
                cache.k_format == RowFormat::tq4 || cache.k_format == RowFormat::tq8,
            "k_format", std::string("decode attention reads K as f16, fp8, tq4 or tq8, not ") +
                            format_name(cache.k_format));
  check_arg(std::isfinite(options.scale) && options.scale >= 0.0f, "options.scale",
            "must be finite and >= 0 (0 means 1/sqrt(D))");
  check_arg(std::isfinite(options.softcap) && options.softcap >= 0.0f, "options.softcap",
            "must be finite and >= 0 (0 means off)");
  check_arg(max_queries > 0, "max_queries", "must be positive");
  check_arg(product_at_most({max_queries, options.n_heads}, kMaxQueryRows), "max_queries",
            "times options.n_heads must be at most 2^24 (query head rows of one run)");
  validate_query_tokens(cache, options);
  check_arg(max_queries >= options.query_tokens, "max_queries",
            "must be at least options.query_tokens");
  validate_fixed_chunks(cache, options);
}

// The chunk policy: automatic within the backend's limits, or every row cut into chunks of
// fixed_chunk_positions; either way max_chunks bounds the chunks of any row this cache and mask
// can produce, which sizes the workspace.
attention::ChunkPolicy chunk_policy(const KvCacheConfig& cache, const DecodeOptions& options,
                                    const attention::ChunkLimits& limits) {
  const std::int64_t longest = longest_visible(cache, options);
  attention::ChunkPolicy policy;
  policy.fixed_positions = options.fixed_chunk_positions;
  policy.min_positions = limits.min_positions;
  policy.spread_positions = limits.spread_positions;
  const std::int64_t c = policy.fixed_positions > 0 ? policy.fixed_positions : policy.min_positions;
  const std::int64_t needed = worst_chunk_count(longest, c);
  policy.max_chunks = static_cast<int>(
      policy.fixed_positions > 0 ? needed : std::min<std::int64_t>(needed, limits.max_chunks));
  return policy;
}

}  // namespace

std::int64_t DecodePlan::chunk_positions(std::int64_t visible) const {
  return attention::chunk_positions(
      {min_chunk_positions, max_chunks, spread_chunk_positions, options.fixed_chunk_positions},
      visible);
}

DecodePlan plan_decode(const KvCacheConfig& cache, const DecodeOptions& options,
                       std::int64_t max_queries) {
  validate_config(cache);
  check_backend(cache.device);
  validate_options(cache, options, max_queries);

  DecodePlan plan;
  plan.cache = cache;
  plan.options = options;
  if (plan.options.scale == 0.0f) {
    plan.options.scale = 1.0f / std::sqrt(static_cast<float>(cache.head_dim));
  }
  plan.max_queries = max_queries;

#ifdef TURBODECODE_WITH_CUDA
  const bool on_cuda = cache.device == Device::cuda;
  const attention::ChunkLimits limits =
      on_cuda ? cuda::chunk_limits(cache.head_dim) : kCpuChunkLimits;
#else
  const attention::ChunkLimits limits = kCpuChunkLimits;
#endif
  const attention::ChunkPolicy chunks = chunk_policy(cache, options, limits);
  plan.min_chunk_positions = chunks.min_positions;
  plan.max_chunks = chunks.max_chunks;
  plan.spread_chunk_positions = chunks.spread_positions;
#ifdef TURBODECODE_WITH_CUDA
  if (on_cuda) {
    cuda::plan_decode(plan);
    return plan;
  }
#endif
  plan.workspace_bytes = attention::CpuWorkspaceLayout(plan).bytes();
  return plan;
}

}  // namespace turbodecode
