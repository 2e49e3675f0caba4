// CUDA split policy (SPEC §2.5): how many splits a query of a given length gets on this
// device, and the workspace the splits' states need.
#include <algorithm>

#include "attention/cuda/decode_cuda.h"
#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/split_launch.h"
#include "attention/cuda/split_shape.h"
#include "common/cuda/cuda_check.cuh"
#include "common/cuda_runtime.h"

namespace turbodecode::cuda {
namespace {

// A split covers at least 128 positions (4 to 16 tiles), so its pipeline and prologue pay off.
constexpr std::int64_t kMinSplitTokens = 128;

int resident_blocks_per_sm(const decode::SplitKernel& kernel) {
  int blocks = 0;
  TD_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, kernel.function, decode::kSplitBlockThreads, kernel.shared_bytes));
  return std::max(blocks, 1);
}

}  // namespace

// A long query alone should fill one wave of resident blocks: target_splits is the largest
// split count whose blocks (times the KV heads and head chunks of one query) all fit in the
// resident-block slots of the device at once. Rounding up instead would start the few blocks
// beyond the wave as a second wave that runs alone for a whole split's time (e.g. 3 blocks
// per SM, 8 KV heads: 50 splits = 400 blocks for 396 slots, nearly twice the time of 49).
// Shorter queries get one split per kMinSplitTokens positions, so they do not split
// needlessly.
attention::SplitPolicy choose_split_policy(const DecodePlan& plan) {
  const KvCacheConfig& cache = plan.cache;
  const int group = plan.options.n_heads / cache.n_kv_heads;
  const int heads = decode::heads_per_block(group);
  const int head_chunks = (group + heads - 1) / heads;
  const decode::SplitKernel kernel = decode::select_split_kernel(
      cache.head_dim, heads, decode::codec_of(cache.k_format), decode::codec_of(cache.v_format));
  const int wave = sm_count() * resident_blocks_per_sm(kernel);
  const int blocks_per_split = cache.n_kv_heads * head_chunks;

  attention::SplitPolicy policy;
  policy.min_split_tokens = kMinSplitTokens;
  policy.target_splits = std::clamp(wave / blocks_per_split, 1, decode::kMaxSplits);
  policy.fixed_splits = plan.options.fixed_splits;
  policy.max_splits = policy.fixed_splits > 0 ? policy.fixed_splits : policy.target_splits;
  return policy;
}

std::int64_t workspace_bytes(const DecodePlan& plan) {
  return decode::WorkspaceLayout(plan.max_queries, plan.options.n_heads, plan.max_splits,
                                 plan.cache.head_dim)
      .bytes();
}

}  // namespace turbodecode::cuda
