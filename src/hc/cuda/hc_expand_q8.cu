// Q8_0 matvec fused with expand (SPEC §3.4): one warp per output element d computes the dot
// product with the same warp routine as q8_matvec, stores it, and lane 0 expands element d
// with the same routine as the expand kernel.
#include "common/cuda_check.cuh"
#include "hc/cuda/hc_cuda.h"
#include "hc/cuda/hc_rows.cuh"
#include "q8/cuda/q8_warp_dot.cuh"

namespace turbodecode::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// With expand.add set (shared expert) the dot product is the add input: block = routed +
// shared; otherwise it is the block input itself.
template <int kFixedN>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    expand_q8_kernel(const hc::ExpandQ8Args args) {
  const q8::MatvecArgs& mv = args.matvec;
  const hc::ExpandArgs& ex = args.expand;
  const std::int64_t d =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (d >= mv.out_rows) return;
  const bool shared = ex.add.data != nullptr;
  for (std::int64_t t = blockIdx.y; t < mv.tokens; t += gridDim.y) {
    const float dot = q8_warp_row_dot(mv.weight + d * mv.row_stride_bytes,
                                      mv.input + t * mv.input_stride, mv.cols);
    if (threadIdx.x % kWarpSize == 0) {
      mv.out[t * mv.out_stride + d] = dot;
      const float v = shared ? hc_block_input(ex.block.row(t)[d], &dot, 0) : dot;
      expand_element<kFixedN>(ex, t, d, v);
    }
  }
}

}  // namespace

void hc_expand_q8(const hc::ExpandQ8Args& args, Stream stream) {
  const std::int64_t tokens = args.matvec.tokens;
  const dim3 grid(
      static_cast<unsigned>((args.matvec.out_rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
      static_cast<unsigned>(tokens < 65535 ? tokens : 65535));
  if (args.expand.n_hc == 4) {
    expand_q8_kernel<4><<<grid, kWarpsPerBlock * kWarpSize, 0, native(stream)>>>(args);
  } else {
    expand_q8_kernel<0><<<grid, kWarpsPerBlock * kWarpSize, 0, native(stream)>>>(args);
  }
  TD_CUDA_CHECK_LAUNCH("expand_q8_kernel");
}

}  // namespace turbodecode::cuda
