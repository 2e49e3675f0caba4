// plan_decode: validates the cache configuration and options once on the host, then picks the
// split policy and sizes the workspace for the cache's device.
#include <cmath>
#include <string>

#include "attention/split_policy.h"
#include "attention/workspace.h"
#include "common/validate.h"
#include "turbodecode/attention.h"

#ifdef TURBODECODE_WITH_CUDA
#include "attention/cuda/decode_cuda.h"
#endif

namespace turbodecode {
namespace {

// Upper bound of fixed_splits: far beyond any useful split count, low enough that the
// workspace a plan asks for stays sane.
constexpr int kMaxFixedSplits = 1024;
// Query head rows one run may hold: keeps the workspace size within int64 for every split
// count and head dim.
constexpr std::int64_t kMaxQueryRows = std::int64_t{1} << 24;

// CPU policy (choice): a split covers at least 512 positions, and a long query is cut into
// 16 splits, enough work items for a many-core host even at batch 1 with few KV heads. The
// constants do not depend on the thread count, so results never do either.
constexpr std::int64_t kCpuMinSplitTokens = 512;
constexpr int kCpuTargetSplits = 16;

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
  check_arg(std::isfinite(options.scale) && options.scale >= 0.0f, "options.scale",
            "must be finite and >= 0 (0 means 1/sqrt(D))");
  check_arg(std::isfinite(options.softcap) && options.softcap >= 0.0f, "options.softcap",
            "must be finite and >= 0 (0 means off)");
  check_arg(options.fixed_splits >= 0 && options.fixed_splits <= kMaxFixedSplits,
            "options.fixed_splits",
            "must be in [0, " + std::to_string(kMaxFixedSplits) + "] (0 means automatic)");
  check_arg(max_queries > 0, "max_queries", "must be positive");
  check_arg(product_at_most({max_queries, options.n_heads}, kMaxQueryRows), "max_queries",
            "times options.n_heads must be at most 2^24 (query head rows of one run)");
}

attention::SplitPolicy cpu_split_policy(const DecodeOptions& options) {
  attention::SplitPolicy policy;
  policy.min_split_tokens = kCpuMinSplitTokens;
  policy.target_splits = kCpuTargetSplits;
  policy.fixed_splits = options.fixed_splits;
  policy.max_splits = options.fixed_splits > 0 ? options.fixed_splits : kCpuTargetSplits;
  return policy;
}

attention::SplitPolicy plan_policy(const DecodePlan& plan) {
  return {plan.max_splits, plan.min_split_tokens, plan.target_splits, plan.options.fixed_splits};
}

}  // namespace

int DecodePlan::splits_for_length(std::int64_t visible) const {
  return attention::splits_for_length(plan_policy(*this), visible);
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

  attention::SplitPolicy policy = cpu_split_policy(options);
#ifdef TURBODECODE_WITH_CUDA
  if (cache.device == Device::cuda) policy = cuda::choose_split_policy(plan);
#endif
  plan.max_splits = policy.max_splits;
  plan.min_split_tokens = policy.min_split_tokens;
  plan.target_splits = policy.target_splits;
  check_arg(plan.max_splits >= options.fixed_splits, "options.fixed_splits",
            "exceeds the device's maximum split count");

  plan.workspace_bytes = attention::CpuWorkspaceLayout(plan).bytes();
#ifdef TURBODECODE_WITH_CUDA
  if (cache.device == Device::cuda) plan.workspace_bytes = cuda::workspace_bytes(plan);
#endif
  return plan;
}

}  // namespace turbodecode
