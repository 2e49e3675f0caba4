// Q8_0 matvec kernel: one warp per output row, tiles of kTokens token rows on the grid's y axis,
// so each weight row is read once per tile rather than once per token.
#include "common/cuda/cuda_check.cuh"
#include "q8/cuda/q8_cuda.h"
#include "q8/cuda/q8_warp_dot.cuh"

namespace turbodecode::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;
constexpr std::int64_t kMaxGridY = 65535;

// At T = 1 the 4096 × 2048 grid (512 blocks) is resident in one wave at 4 blocks per SM. Token
// rows first_token + kTokens·tile for the grid's tiles.
template <int kTokens>
__global__ void __launch_bounds__(kThreads, 4)
    q8_matvec_kernel(const q8::MatvecArgs args, std::int64_t first_token, std::int64_t tiles) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  auto& warp_shared = *reinterpret_cast<Q8WarpShared<kWarpsPerBlock, kTokens>*>(shared_bytes);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  // Warps past the last row still take part in the block's input staging.
  const std::uint8_t* row = r < args.out_rows ? args.weight + r * args.row_stride_bytes : nullptr;
  allow_dependent_grids();
  for (std::int64_t y = blockIdx.y; y < tiles; y += gridDim.y) {
    const std::int64_t t0 = first_token + y * kTokens;
    float dots[kTokens];
    q8_warp_row_dots<kThreads, kTokens>(row, args.input + t0 * args.input_stride, args.input_stride,
                                        args.cols, warp_shared.tile, warp_shared.buffers[warp],
                                        dots);
    if (row != nullptr && threadIdx.x % kWarpSize == 0) {
#pragma unroll
      for (int i = 0; i < kTokens; ++i) args.out[(t0 + i) * args.out_stride + r] = dots[i];
    }
  }
}

}  // namespace

void q8_matvec(const q8::MatvecArgs& args, Stream stream) {
  // Prefill: tensor cores (q8_mma_matvec.cu). Rows at T ≤ kQ8TileTokens take this CUDA-core
  // kernel, larger T the tensor-core one: results are batch-invariant within each range but
  // not across it.
  if (args.tokens > kQ8TileTokens) {
    q8_matvec_mma(args, stream);
    return;
  }
  const auto blocks = static_cast<unsigned>((args.out_rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  for_each_q8_tile_size(args.tokens, [&]<int kTokens>(std::int64_t first, std::int64_t tiles) {
    const dim3 grid(blocks, static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
    const int shared_bytes =
        q8_warp_shared_bytes<&q8_matvec_kernel<kTokens>, kWarpsPerBlock, kTokens>();
    launch_dependent(q8_matvec_kernel<kTokens>, grid, kThreads, shared_bytes, native(stream), args,
                     first, tiles);
  });
}

}  // namespace turbodecode::cuda
