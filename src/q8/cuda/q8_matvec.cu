// Q8_0 matvec kernel: one warp per output row, tiles of kQ8TileTokens token rows on the grid's
// y axis, so each weight row is read once per tile rather than once per token.
#include "common/cuda_check.cuh"
#include "q8/cuda/q8_cuda.h"
#include "q8/cuda/q8_warp_dot.cuh"

namespace turbodecode::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

// At T = 1 the 4096 × 2048 grid (512 blocks) is resident in one wave at 4 blocks per SM.
__global__ void __launch_bounds__(kThreads, 4) q8_matvec_kernel(const q8::MatvecArgs args) {
  __shared__ Q8InputTile tile;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  // Warps past the last row still take part in the block's input staging.
  const std::uint8_t* row = r < args.out_rows ? args.weight + r * args.row_stride_bytes : nullptr;
  for (std::int64_t t0 = static_cast<std::int64_t>(blockIdx.y) * kQ8TileTokens; t0 < args.tokens;
       t0 += static_cast<std::int64_t>(gridDim.y) * kQ8TileTokens) {
    const std::int64_t left = args.tokens - t0;
    const int tokens = left < kQ8TileTokens ? static_cast<int>(left) : kQ8TileTokens;
    float dots[kQ8TileTokens];
    q8_warp_row_dots<kThreads>(row, args.input + t0 * args.input_stride, args.input_stride, tokens,
                               args.cols, tile, dots);
    if (row != nullptr && threadIdx.x % kWarpSize == 0) {
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
  q8_matvec_kernel<<<grid, kThreads, 0, native(stream)>>>(args);
  TD_CUDA_CHECK_LAUNCH("q8_matvec_kernel");
}

}  // namespace turbodecode::cuda
