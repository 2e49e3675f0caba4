// Standalone HC kernels (split, collapse, RMSNorm, expand, head weights) and the fused
// split + collapse (+ RMSNorm) kernel.
#include <cstdint>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dependent_launch.cuh"
#include "hc/cuda/hc_cuda.h"
#include "hc/cuda/hc_rows.cuh"

namespace turbodecode::cuda {
namespace {

constexpr int kSplitThreads = 128;
constexpr int kElementThreads = 256;
// Rows on the grid's y axis, looped when T exceeds the grid limit.
constexpr std::int64_t kMaxGridY = 65535;

unsigned grid_rows(std::int64_t rows) {
  return static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY);
}
unsigned blocks_for(std::int64_t items, int threads) {
  return static_cast<unsigned>((items + threads - 1) / threads);
}

template <int kFixedN>
__global__ void split_kernel(const hc::SplitArgs args) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= args.rows) return;
  hc_split_row<kFixedN>(args.mix.row(t), args.scale, args.base, args.n_hc, args.iters, args.eps,
                        args.split.row(t));
}

// One thread per (t, d): a row's elements are independent, so a row spreads over many blocks
// (at T = 1 one block per row would be latency-bound).
template <int kFixedN>
__global__ void __launch_bounds__(kElementThreads) collapse_kernel(const hc::CollapseArgs args) {
  const std::int64_t d = static_cast<std::int64_t>(blockIdx.x) * kElementThreads + threadIdx.x;
  if (d >= args.embd) return;
  for (std::int64_t t = blockIdx.y; t < args.rows; t += gridDim.y) {
    float pre[kFixedN > 0 ? kFixedN : kMaxHcStreams];
    const int n = kFixedN > 0 ? kFixedN : args.n_hc;
#pragma unroll
    for (int h = 0; h < n; ++h) pre[h] = args.pre.at(t, h);
    args.out.row(t)[d] = collapse_element<kFixedN>(args, pre, t, d);
  }
}

__global__ void __launch_bounds__(kRowThreads) rms_norm_kernel(const hc::RmsNormArgs args) {
  __shared__ float scratch[kRowWarps];
  for (std::int64_t t = blockIdx.x; t < args.rows; t += gridDim.x) {
    rms_norm_row_block(args, args.u.row(t), t, scratch);
  }
}

template <int kFixedN>
__global__ void __launch_bounds__(kRowThreads)
    split_collapse_kernel(const hc::SplitCollapseArgs args) {
  __shared__ float split_row[kSplitStride];
  __shared__ float scratch[kRowWarps];
  for (std::int64_t t = blockIdx.x; t < args.split.rows; t += gridDim.x) {
    __syncthreads();  // split_row of the previous row is no longer read
    split_rows_block<kFixedN>(args.split, args.split.mix.row(t), 0, t, 1, split_row);
    if (args.norm.out.data != nullptr) {
      collapse_norm_row_block<kFixedN>(args.collapse, args.norm, split_row, t, scratch);
    } else {
      collapse_row_block(args.collapse, split_row, t);
    }
  }
}

// The expand kernels may overlap the kernel before them (launch_dependent): they wait for it
// before reading anything, and let the kernel after them start early.
template <int kFixedN>
__global__ void __launch_bounds__(kElementThreads) expand_kernel(const hc::ExpandArgs args) {
  allow_dependent_grids();
  wait_for_prior_grids();
  const std::int64_t d = static_cast<std::int64_t>(blockIdx.x) * kElementThreads + threadIdx.x;
  if (d >= args.embd) return;
  for (std::int64_t t = blockIdx.y; t < args.rows; t += gridDim.y) {
    const float* add = args.add.data != nullptr ? args.add.row(t) : nullptr;
    expand_element<kFixedN>(args, t, d, hc_block_input(args.block.row(t)[d], add, d));
  }
}

// The same per-element math on four consecutive elements per thread with 16-byte accesses
// (when every row and stream start is 16-byte aligned): a quarter of the instructions.
template <int kFixedN>
__global__ void __launch_bounds__(kElementThreads) expand4_kernel(const hc::ExpandArgs args) {
  constexpr int kSlots = kFixedN > 0 ? kFixedN : kMaxHcStreams;
  const int n = kFixedN > 0 ? kFixedN : args.n_hc;
  allow_dependent_grids();
  wait_for_prior_grids();
  const std::int64_t d =
      4 * (static_cast<std::int64_t>(blockIdx.x) * kElementThreads + threadIdx.x);
  if (d >= args.embd) return;
  for (std::int64_t t = blockIdx.y; t < args.rows; t += gridDim.y) {
    float4 x[kSlots];
#pragma unroll
    for (int r = 0; r < n; ++r) x[r] = __ldg(reinterpret_cast<const float4*>(args.x.at(t, r) + d));
    const float4 block = __ldg(reinterpret_cast<const float4*>(args.block.row(t) + d));
    float4 v = block;
    if (args.add.data != nullptr) {
      const float4 add = __ldg(reinterpret_cast<const float4*>(args.add.row(t) + d));
      v = make_float4(hc_block_input(block.x, &add.x, 0), hc_block_input(block.y, &add.y, 0),
                      hc_block_input(block.z, &add.z, 0), hc_block_input(block.w, &add.w, 0));
    }
#pragma unroll
    for (int c = 0; c < n; ++c) {
      const float post = args.post.at(t, c);
      float4 acc = make_float4(v.x * post, v.y * post, v.z * post, v.w * post);
#pragma unroll
      for (int r = 0; r < n; ++r) {
        const float w = args.comb.at(t, r, c);
        acc.x = hc_accumulate(acc.x, w, x[r].x);
        acc.y = hc_accumulate(acc.y, w, x[r].y);
        acc.z = hc_accumulate(acc.z, w, x[r].z);
        acc.w = hc_accumulate(acc.w, w, x[r].w);
      }
      *reinterpret_cast<float4*>(args.out.at(t, c) + d) = acc;
    }
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// True when every row and stream of block, add, x and out starts on a 16-byte boundary.
bool expand_vectorisable(const hc::ExpandArgs& a) {
  const bool strides = a.embd % 4 == 0 && a.block.stride % 4 == 0 && a.x.row_stride % 4 == 0 &&
                       a.x.stream_stride % 4 == 0 && a.out.row_stride % 4 == 0 &&
                       a.out.stream_stride % 4 == 0 &&
                       (a.add.data == nullptr || a.add.stride % 4 == 0);
  return strides && aligned16(a.block.data) && aligned16(a.x.data) && aligned16(a.out.data) &&
         (a.add.data == nullptr || aligned16(a.add.data));
}

__global__ void head_weights_kernel(const hc::HeadWeightsArgs args) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= args.rows * args.n_hc) return;
  const std::int64_t t = i / args.n_hc;
  const int h = static_cast<int>(i % args.n_hc);
  args.weights[t * args.weights_row_stride + h * args.weights_stream_stride] =
      hc_head_weight(args.logits.at(t, h), args.scale[0], args.base[h], args.post_scale, args.eps);
}

}  // namespace

void hc_split(const hc::SplitArgs& args, Stream stream) {
  const unsigned blocks = blocks_for(args.rows, kSplitThreads);
  if (args.n_hc == 4) {
    split_kernel<4><<<blocks, kSplitThreads, 0, native(stream)>>>(args);
  } else {
    split_kernel<0><<<blocks, kSplitThreads, 0, native(stream)>>>(args);
  }
  TD_CUDA_CHECK_LAUNCH("split_kernel");
}

void hc_collapse(const hc::CollapseArgs& args, Stream stream) {
  const dim3 grid(blocks_for(args.embd, kElementThreads), grid_rows(args.rows));
  if (args.n_hc == 4) {
    collapse_kernel<4><<<grid, kElementThreads, 0, native(stream)>>>(args);
  } else {
    collapse_kernel<0><<<grid, kElementThreads, 0, native(stream)>>>(args);
  }
  TD_CUDA_CHECK_LAUNCH("collapse_kernel");
}

void hc_rms_norm(const hc::RmsNormArgs& args, Stream stream) {
  rms_norm_kernel<<<grid_rows(args.rows), kRowThreads, 0, native(stream)>>>(args);
  TD_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

void hc_split_collapse(const hc::SplitCollapseArgs& args, Stream stream) {
  const unsigned blocks = grid_rows(args.split.rows);
  if (args.split.n_hc == 4) {
    split_collapse_kernel<4><<<blocks, kRowThreads, 0, native(stream)>>>(args);
  } else {
    split_collapse_kernel<0><<<blocks, kRowThreads, 0, native(stream)>>>(args);
  }
  TD_CUDA_CHECK_LAUNCH("split_collapse_kernel");
}

void hc_expand(const hc::ExpandArgs& args, Stream stream) {
  if (expand_vectorisable(args)) {
    const dim3 grid(blocks_for((args.embd + 3) / 4, kElementThreads), grid_rows(args.rows));
    launch_dependent(args.n_hc == 4 ? expand4_kernel<4> : expand4_kernel<0>, grid, kElementThreads,
                     0, native(stream), args);
    return;
  }
  const dim3 grid(blocks_for(args.embd, kElementThreads), grid_rows(args.rows));
  launch_dependent(args.n_hc == 4 ? expand_kernel<4> : expand_kernel<0>, grid, kElementThreads, 0,
                   native(stream), args);
}

void hc_head_weights(const hc::HeadWeightsArgs& args, Stream stream) {
  head_weights_kernel<<<blocks_for(args.rows * args.n_hc, kSplitThreads), kSplitThreads, 0,
                        native(stream)>>>(args);
  TD_CUDA_CHECK_LAUNCH("head_weights_kernel");
}

}  // namespace turbodecode::cuda
