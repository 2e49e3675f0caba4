// Q8_0 matvec kernel: one warp per output element, rows of T tokens on the grid's y axis.
#include "common/cuda_check.cuh"
#include "q8/cuda/q8_cuda.h"
#include "q8/cuda/q8_warp_dot.cuh"

namespace turbodecode::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    q8_matvec_kernel(const q8::MatvecArgs args) {
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (r >= args.out_rows) return;
  const std::uint8_t* row = args.weight + r * args.row_stride_bytes;
  for (std::int64_t t = blockIdx.y; t < args.tokens; t += gridDim.y) {
    const float value = q8_warp_row_dot(row, args.input + t * args.input_stride, args.cols);
    if (threadIdx.x % kWarpSize == 0) args.out[t * args.out_stride + r] = value;
  }
}

}  // namespace

void q8_matvec(const q8::MatvecArgs& args, Stream stream) {
  const dim3 grid(static_cast<unsigned>((args.out_rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>(args.tokens < 65535 ? args.tokens : 65535));
  q8_matvec_kernel<<<grid, kWarpsPerBlock * kWarpSize, 0, native(stream)>>>(args);
  TD_CUDA_CHECK_LAUNCH("q8_matvec_kernel");
}

}  // namespace turbodecode::cuda
