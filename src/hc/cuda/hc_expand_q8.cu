// Q8_0 matvec fused with expand (SPEC §3.4): one warp per output element d computes the dot
// products of a tile of tokens with the same warp routine as q8_matvec, lane 0 stores them, and
// lanes c < n expand element d into destination stream c with the same float operations as the
// expand kernels.
#include "common/cuda/cuda_check.cuh"
#include "hc/cuda/hc_cuda.h"
#include "hc/cuda/hc_rows.cuh"
#include "q8/cuda/q8_cuda.h"
#include "q8/cuda/q8_warp_dot.cuh"

namespace turbodecode::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;
constexpr std::int64_t kMaxGridY = 65535;

// With expand.add set (shared expert) the dot product is the add input: block = routed +
// shared; otherwise it is the block input itself. Token rows first_token + kTokens·tile.
template <int kFixedN, int kTokens>
__global__ void __launch_bounds__(kThreads, 4)
    expand_q8_kernel(const hc::ExpandQ8Args args, std::int64_t first_token, std::int64_t tiles) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  auto& warp_shared = *reinterpret_cast<Q8WarpShared<kWarpsPerBlock, kTokens>*>(shared_bytes);
  const q8::MatvecArgs& mv = args.matvec;
  const hc::ExpandArgs& ex = args.expand;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int n = kFixedN > 0 ? kFixedN : ex.n_hc;
  const std::int64_t d = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  // Warps past the last row still take part in the block's input staging.
  const std::uint8_t* row = d < mv.out_rows ? mv.weight + d * mv.row_stride_bytes : nullptr;
  const bool shared = ex.add.data != nullptr;
  allow_dependent_grids();
  for (std::int64_t y = blockIdx.y; y < tiles; y += gridDim.y) {
    const std::int64_t t0 = first_token + y * kTokens;
    float dots[kTokens];
    q8_warp_row_dots<kThreads, kTokens>(row, mv.input + t0 * mv.input_stride, mv.input_stride,
                                        mv.cols, warp_shared.tile, warp_shared.buffers[warp], dots);
    if (row == nullptr || lane >= n) continue;
#pragma unroll
    for (int i = 0; i < kTokens; ++i) {
      const std::int64_t t = t0 + i;
      const float dot = dots[i];
      if (lane == 0) mv.out[t * mv.out_stride + d] = dot;
      const float v = shared ? hc_block_input(ex.block.row(t)[d], &dot, 0) : dot;
      expand_element_into<kFixedN>(ex, t, d, lane, v);
    }
  }
}

template <int kFixedN>
void launch_expand_q8(const hc::ExpandQ8Args& args, Stream stream) {
  const auto blocks =
      static_cast<unsigned>((args.matvec.out_rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  for_each_q8_tile_size(
      args.matvec.tokens, [&]<int kTokens>(std::int64_t first, std::int64_t tiles) {
        const dim3 grid(blocks, static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
        const int shared_bytes =
            q8_warp_shared_bytes<&expand_q8_kernel<kFixedN, kTokens>, kWarpsPerBlock, kTokens>();
        launch_dependent(expand_q8_kernel<kFixedN, kTokens>, grid, kThreads, shared_bytes,
                         native(stream), args, first, tiles);
      });
}

}  // namespace

void hc_expand_q8(const hc::ExpandQ8Args& args, Stream stream) {
  // Prefill: the matvec (tensor cores above kQ8TileTokens) into its output, then the standalone
  // expand, which reads that output as its block input (attention) or as its add input (shared
  // expert: block = routed + shared). These are the launches of q8_matvec followed by hc_expand,
  // so fused == unfused bitwise; the one-launch fusion (SPEC §3.4) serves T ≤ kQ8TileTokens.
  if (args.matvec.tokens > kQ8TileTokens) {
    q8_matvec(args.matvec, stream);
    hc_expand(args.expand, stream);
    return;
  }
  if (args.expand.n_hc == 4) {
    launch_expand_q8<4>(args, stream);
  } else {
    launch_expand_q8<0>(args, stream);
  }
}

}  // namespace turbodecode::cuda
