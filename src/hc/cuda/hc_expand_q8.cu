// Q8_0 matvec fused with expand (SPEC §3.4): one warp per output element d computes the dot
// products of a tile of tokens with the same warp routine as q8_matvec, lane 0 stores them, and
// lanes c < n expand element d into destination stream c with the same float operations as the
// expand kernels.
#include "common/cuda_check.cuh"
#include "hc/cuda/hc_cuda.h"
#include "hc/cuda/hc_rows.cuh"
#include "q8/cuda/q8_warp_dot.cuh"

namespace turbodecode::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

// With expand.add set (shared expert) the dot product is the add input: block = routed +
// shared; otherwise it is the block input itself.
template <int kFixedN>
__global__ void __launch_bounds__(kThreads, 4) expand_q8_kernel(const hc::ExpandQ8Args args) {
  __shared__ Q8InputTile tile;
  const q8::MatvecArgs& mv = args.matvec;
  const hc::ExpandArgs& ex = args.expand;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int n = kFixedN > 0 ? kFixedN : ex.n_hc;
  const std::int64_t d = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  // Warps past the last row still take part in the block's input staging.
  const std::uint8_t* row = d < mv.out_rows ? mv.weight + d * mv.row_stride_bytes : nullptr;
  const bool shared = ex.add.data != nullptr;
  for (std::int64_t t0 = static_cast<std::int64_t>(blockIdx.y) * kQ8TileTokens; t0 < mv.tokens;
       t0 += static_cast<std::int64_t>(gridDim.y) * kQ8TileTokens) {
    const std::int64_t left = mv.tokens - t0;
    const int tokens = left < kQ8TileTokens ? static_cast<int>(left) : kQ8TileTokens;
    float dots[kQ8TileTokens];
    q8_warp_row_dots<kThreads>(row, mv.input + t0 * mv.input_stride, mv.input_stride, tokens,
                               mv.cols, tile, dots);
    if (row == nullptr || lane >= n) continue;
#pragma unroll
    for (int i = 0; i < kQ8TileTokens; ++i) {
      if (i < tokens) {
        const std::int64_t t = t0 + i;
        const float dot = dots[i];
        if (lane == 0) mv.out[t * mv.out_stride + d] = dot;
        const float v = shared ? hc_block_input(ex.block.row(t)[d], &dot, 0) : dot;
        expand_element_into<kFixedN>(ex, t, d, lane, v);
      }
    }
  }
}

}  // namespace

void hc_expand_q8(const hc::ExpandQ8Args& args, Stream stream) {
  const std::int64_t tiles = (args.matvec.tokens + kQ8TileTokens - 1) / kQ8TileTokens;
  const dim3 grid(
      static_cast<unsigned>((args.matvec.out_rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
      static_cast<unsigned>(tiles < 65535 ? tiles : 65535));
  if (args.expand.n_hc == 4) {
    expand_q8_kernel<4><<<grid, kThreads, 0, native(stream)>>>(args);
  } else {
    expand_q8_kernel<0><<<grid, kThreads, 0, native(stream)>>>(args);
  }
  TD_CUDA_CHECK_LAUNCH("expand_q8_kernel");
}

}  // namespace turbodecode::cuda
