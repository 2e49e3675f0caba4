// Q8_0 matvec kernel: one warp per output row, tiles of kQ8TileTokens token rows on the grid's
// y axis, so each weight row is read once per tile rather than once per token.
#include "common/cuda_check.cuh"
#include "q8/cuda/q8_cuda.h"
#include "q8/cuda/q8_warp_dot.cuh"

namespace turbodecode::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    q8_matvec_kernel(const q8::MatvecArgs args) {
  __shared__ Q8Stage stages[kWarpsPerBlock];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (r >= args.out_rows) return;
  const std::uint8_t* row = args.weight + r * args.row_stride_bytes;
  for (std::int64_t t0 = static_cast<std::int64_t>(blockIdx.y) * kQ8TileTokens; t0 < args.tokens;
       t0 += static_cast<std::int64_t>(gridDim.y) * kQ8TileTokens) {
    const std::int64_t left = args.tokens - t0;
    const int tokens = left < kQ8TileTokens ? static_cast<int>(left) : kQ8TileTokens;
    float dots[kQ8TileTokens];
    q8_warp_row_dots(row, args.input + t0 * args.input_stride, args.input_stride, tokens, args.cols,
                     stages[warp], dots);
    if (threadIdx.x % kWarpSize == 0) {
#pragma unroll
      for (int i = 0; i < kQ8TileTokens; ++i) {
        if (i < tokens) args.out[(t0 + i) * args.out_stride + r] = dots[i];
      }
    }
  }
}

}  // namespace

void q8_matvec(const q8::MatvecArgs& args, Stream stream) {
  const std::int64_t tiles = (args.tokens + kQ8TileTokens - 1) / kQ8TileTokens;
  const dim3 grid(static_cast<unsigned>((args.out_rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>(tiles < 65535 ? tiles : 65535));
  q8_matvec_kernel<<<grid, kWarpsPerBlock * kWarpSize, 0, native(stream)>>>(args);
  TD_CUDA_CHECK_LAUNCH("q8_matvec_kernel");
}

}  // namespace turbodecode::cuda
