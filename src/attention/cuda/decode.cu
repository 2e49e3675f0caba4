// CUDA backend of run_decode: resolves the validated views into kernel arguments, launches
// the split kernel for the cache's compile-time shape (one dispatch switch) and the merge.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "attention/cuda/decode_cuda.h"
#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/merge_kernel.cuh"
#include "attention/cuda/split_launch.h"
#include "attention/cuda/split_shape.h"
#include "common/cuda/cuda_check.cuh"
#include "common/validate.h"

namespace turbodecode::cuda {
namespace {

using decode::DecodeParams;
using decode::RowCodec;

// The split kernel copies rows with 16-byte cp.async: every row must start 16-byte aligned.
bool rows_aligned(const TensorView& rows) {
  const auto element = static_cast<std::int64_t>(dtype_bytes(rows.dtype));
  bool aligned = reinterpret_cast<std::uintptr_t>(rows.data) % 16 == 0;
  for (int dim = 0; dim < 3; ++dim) aligned = aligned && (rows.strides[dim] * element) % 16 == 0;
  return aligned;
}

decode::CacheSide cache_side(RowFormat format, const TensorView& rows, const TensorView& norms,
                             const char* name) {
  check_arg(rows_aligned(rows), name, "CUDA decode needs 16-byte aligned rows and row strides");
  decode::CacheSide side{};
  side.rows = static_cast<const unsigned char*>(rows.data);
  const auto element = static_cast<std::int64_t>(dtype_bytes(rows.dtype));
  for (int dim = 0; dim < 3; ++dim) side.row_stride_bytes[dim] = rows.strides[dim] * element;
  if (is_quantized(format)) {
    side.norms = static_cast<const float*>(norms.data);
    for (int dim = 0; dim < 3; ++dim) side.norm_stride[dim] = norms.strides[dim];
    side.bits = format_bits(format);
  }
  return side;
}

DecodeParams make_params(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                         const TensorView& slot_ids, const TensorView& seq_pos,
                         const TensorView& out, const TensorView& workspace) {
  const KvCacheConfig& config = plan.cache;
  DecodeParams p;
  p.k = cache_side(config.k_format, cache.k, cache.k_norms, "cache.k");
  p.v = cache_side(config.v_format, cache.v, cache.v_norms, "cache.v");
  p.q = q.as<const float>();
  p.q_stride[0] = q.strides[0];
  p.q_stride[1] = q.strides[1];
  p.slot_ids = slot_ids.as<const std::int32_t>();
  p.seq_pos = seq_pos.as<const std::int32_t>();
  p.slot_stride = slot_ids.strides[0];
  p.pos_stride = seq_pos.strides[0];
  p.out = out.as<float>();
  p.out_stride[0] = out.strides[0];
  p.out_stride[1] = out.strides[1];
  const decode::WorkspaceLayout layout(plan.max_queries, plan.options.n_heads, plan.max_splits,
                                       config.head_dim);
  p.partial_o = workspace.as<float>();
  p.partial_ml = reinterpret_cast<float2*>(workspace.as<unsigned char>() + layout.partial_o_bytes);
  p.slots = config.slots;
  p.capacity = config.capacity;
  p.linear_cache = config.kind == LayerKind::linear;
  p.mask = plan.options.mask;
  p.sliding_window = plan.options.sliding_window;
  p.policy = {plan.max_splits, plan.min_split_tokens, plan.target_splits,
              plan.options.fixed_splits};
  p.max_splits = plan.max_splits;
  p.n_heads = plan.options.n_heads;
  p.group = plan.options.n_heads / config.n_kv_heads;
  p.heads_per_block = decode::heads_per_block(p.group);
  p.head_chunks = (p.group + p.heads_per_block - 1) / p.heads_per_block;
  p.scale = plan.options.scale;
  p.softcap = plan.options.softcap;
  p.scale_factor_d512 = config.scale_factor_d512;
  p.unrotate_output = is_quantized(config.v_format) && !plan.options.rotated_output;
  return p;
}

// Split blocks per query and KV head (grid x of the split kernel). A block takes the fewest
// consecutive splits of its query that these blocks cover (split_kernel), so a split's result
// does not depend on it. One split per block unless the launch's blocks, at most n · max_splits
// per KV head, fill kMinSplitWaves waves or more (target_splits per KV head is one wave); then
// blocks take several splits, so they pay their prologue and pipeline fill once for several and
// fewer empty grid slots are launched. At 8 waves the mixed batch (16 queries, 1K–64K) lost 11%
// (its longest query's blocks, taking two long splits each, ran last); 16 leaves it alone.
int split_blocks_per_query(const DecodePlan& plan, std::int64_t n) {
  constexpr std::int64_t kMinSplitWaves = 16;
  const std::int64_t splits_per_block = std::clamp<std::int64_t>(
      n * plan.max_splits / (kMinSplitWaves * plan.target_splits), 1, plan.max_splits);
  return static_cast<int>((plan.max_splits + splits_per_block - 1) / splits_per_block);
}

}  // namespace

void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                const TensorView& workspace, Stream stream) {
  const std::int64_t n = q.shape[0];
  if (n == 0) return;
  // Queries index grid.z of the split kernel.
  check_arg(n <= std::numeric_limits<std::uint16_t>::max(), "q",
            "the CUDA backend serves at most 65535 queries per call");
  // The kernels index rows with 32-bit arithmetic (up to two capacities).
  check_arg(plan.cache.capacity <= (std::int64_t{1} << 30), "cache.capacity",
            "the CUDA backend supports at most 2^30 positions per slot");
  check_arg(plan.max_splits <= decode::kMaxSplits, "plan.max_splits",
            "the CUDA backend merges at most " + std::to_string(decode::kMaxSplits) +
                " splits per query");
  const DecodeParams p = make_params(plan, cache, q, slot_ids, seq_pos, out, workspace);
  const decode::SplitKernel split = decode::select_split_kernel(
      plan.cache.head_dim, p.heads_per_block, decode::codec_of(plan.cache.k_format),
      decode::codec_of(plan.cache.v_format));
  const dim3 grid(static_cast<unsigned>(split_blocks_per_query(plan, n)),
                  static_cast<unsigned>(plan.cache.n_kv_heads * p.head_chunks),
                  static_cast<unsigned>(n));
  const cudaStream_t s = native(stream);
  split.launch(p, grid, s);
  if (plan.cache.head_dim == 256) {
    decode::launch_merge_kernel<256>(p, n, s);
  } else {
    decode::launch_merge_kernel<512>(p, n, s);
  }
}

}  // namespace turbodecode::cuda
