// merge_attention on the GPU: one block per (row, head), its threads striding over D so that
// every part's row is read coalesced; parts are summed in order, as on the CPU.
#include <cstdint>

#include "common/cuda/cuda_check.cuh"
#include "shard/cuda/shard_cuda.h"

namespace turbodecode::cuda {
namespace {

constexpr int kMergeThreads = 128;
constexpr std::int64_t kMaxGridX = 2147483647;

__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const shard::MergeArgs args) {
  for (std::int64_t i = blockIdx.x; i < args.rows * args.heads; i += gridDim.x) {
    const std::int64_t row = i / args.heads;
    const std::int64_t head = i % args.heads;
    // Every thread computes the totals itself: R lse values, read by all threads at once.
    const shard::MergeTotals totals = shard::merge_totals(args, row, head);
    float* out = args.out_row(row, head);
    for (std::int64_t d = threadIdx.x; d < args.dim; d += kMergeThreads) {
      out[d] = shard::merged_element(args, totals, row, head, d);
    }
    if (args.lse != nullptr && threadIdx.x == 0)
      *args.lse_at(row, head) = shard::merged_lse(totals);
  }
}

}  // namespace

void merge_attention(const shard::MergeArgs& args, Stream stream) {
  const std::int64_t items = args.rows * args.heads;
  const auto blocks = static_cast<unsigned>(items < kMaxGridX ? items : kMaxGridX);
  merge_kernel<<<blocks, kMergeThreads, 0, native(stream)>>>(args);
  TD_CUDA_CHECK_LAUNCH("merge_kernel");
}

}  // namespace turbodecode::cuda
