// Block-level row routines shared by the standalone HC kernels and the fused ones (HC-pre,
// split + collapse + norm), so that fused and unfused launches do identical float operations:
// every routine maps element d to thread d mod kRowThreads and reduces in a fixed order.
#pragma once

#include <cstdint>

#include "hc/hc_args.h"
#include "hc/hc_math.h"
#include "q8/cuda/q8_warp_dot.cuh"

namespace turbodecode::cuda {

inline constexpr int kRowThreads = 256;
inline constexpr int kRowWarps = kRowThreads / kWarpSize;

// Sum over a block of kRowThreads threads: warp butterflies, then the warp totals in warp
// order. `scratch` holds kRowWarps floats. Every thread gets the total.
__device__ __forceinline__ float block_sum(float value, float* scratch) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = lane < kRowWarps ? scratch[lane] : 0.0f;
  return warp_sum(total);
}

// Element d of collapsed row t: Σ_h pre[h]·x[t][h][d], h ascending. kFixedN > 0 unrolls
// n = kFixedN so that all n loads are in flight together.
template <int kFixedN>
__device__ __forceinline__ float collapse_element(const hc::CollapseArgs& args, const float* pre,
                                                  std::int64_t t, std::int64_t d) {
  const int n = kFixedN > 0 ? kFixedN : args.n_hc;
  float acc = 0.0f;
#pragma unroll
  for (int h = 0; h < n; ++h) acc = hc_accumulate(acc, pre[h], __ldg(args.x.at(t, h) + d));
  return acc;
}

// collapsed row t by one block (pre: n values in shared or global memory).
__device__ __forceinline__ void collapse_row_block(const hc::CollapseArgs& args, const float* pre,
                                                   std::int64_t t) {
  float* out = args.out.row(t);
#pragma unroll 4
  for (std::int64_t d = threadIdx.x; d < args.embd; d += kRowThreads) {
    out[d] = collapse_element<0>(args, pre, t, d);
  }
}

// Weighted RMSNorm of row u (each thread reads back only the elements it owns, so u may have
// just been written by the same threads).
__device__ __forceinline__ void rms_norm_row_block(const hc::RmsNormArgs& args, const float* u,
                                                   std::int64_t t, float* scratch) {
  float squares = 0.0f;
#pragma unroll 4
  for (std::int64_t d = threadIdx.x; d < args.embd; d += kRowThreads) {
    squares = fmaf(u[d], u[d], squares);
  }
  const float scale = hc_rms_scale(block_sum(squares, scratch), args.embd, args.eps);
  float* out = args.out.row(t);
#pragma unroll 4
  for (std::int64_t d = threadIdx.x; d < args.embd; d += kRowThreads) {
    out[d] = hc_rms_apply(u[d], scale, args.weight[d]);
  }
}

// collapse then RMSNorm of row t with the collapsed row kept in registers (up to
// kCachedPerThread elements per thread): the same float operations, in the same order, as
// collapse_row_block followed by rms_norm_row_block, with every load of x and of the norm
// weight issued up front; kFixedN > 0 unrolls the streams.
inline constexpr int kCachedPerThread = 24;  // E up to 6144 (DeepSeek-V4.1: 5120)

template <int kFixedN>
__device__ __forceinline__ void collapse_norm_cached(const hc::CollapseArgs& collapse,
                                                     const hc::RmsNormArgs& norm, const float* pre,
                                                     std::int64_t t, float* scratch) {
  float u[kCachedPerThread];
  float weight[kCachedPerThread];  // loaded before the reduction, so it hides their latency
#pragma unroll
  for (int i = 0; i < kCachedPerThread; ++i) {
    const std::int64_t d = threadIdx.x + i * kRowThreads;
    const bool inside = d < collapse.embd;
    u[i] = inside ? collapse_element<kFixedN>(collapse, pre, t, d) : 0.0f;
    weight[i] = inside ? __ldg(norm.weight + d) : 0.0f;
  }
  float* out = collapse.out.row(t);
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kCachedPerThread; ++i) {
    const std::int64_t d = threadIdx.x + i * kRowThreads;
    if (d < collapse.embd) {
      out[d] = u[i];
      squares = fmaf(u[i], u[i], squares);
    }
  }
  const float scale = hc_rms_scale(block_sum(squares, scratch), norm.embd, norm.eps);
  float* normed = norm.out.row(t);
#pragma unroll
  for (int i = 0; i < kCachedPerThread; ++i) {
    const std::int64_t d = threadIdx.x + i * kRowThreads;
    if (d < collapse.embd) normed[d] = hc_rms_apply(u[i], scale, weight[i]);
  }
}

// Rows too wide to cache take the two block routines one after the other.
template <int kFixedN>
__device__ __forceinline__ void collapse_norm_row_block(const hc::CollapseArgs& collapse,
                                                        const hc::RmsNormArgs& norm,
                                                        const float* pre, std::int64_t t,
                                                        float* scratch) {
  if (collapse.embd > kCachedPerThread * kRowThreads) {
    collapse_row_block(collapse, pre, t);
    rms_norm_row_block(norm, collapse.out.row(t), t, scratch);
  } else {
    collapse_norm_cached<kFixedN>(collapse, norm, pre, t, scratch);
  }
}

// Rows of kSplitStride floats hold one split (or mix) row each in shared memory.
inline constexpr int kSplitStride = hc_mix_width(kMaxHcStreams);

// split of rows t0 .. t0 + rows (rows ≤ kRowThreads), thread r computing row r from mix row
// mix + r·mix_stride into shared split_rows + r·kSplitStride, all rows at once; after a block
// barrier (split_rows is then readable by every thread) the block copies them to the output.
// kFixedN = 4 keeps the Sinkhorn matrix in registers (kFixedN = 0: a local array, any n).
template <int kFixedN>
__device__ __forceinline__ void split_rows_block(const hc::SplitArgs& args, const float* mix,
                                                 std::int64_t mix_stride, std::int64_t t0, int rows,
                                                 float* split_rows) {
  const int r = static_cast<int>(threadIdx.x);
  if (r < rows) {
    hc_split_row<kFixedN>(mix + r * mix_stride, args.scale, args.base, args.n_hc, args.iters,
                          args.eps, split_rows + r * kSplitStride);
  }
  __syncthreads();
  const int m = hc_mix_width(args.n_hc);
  for (int e = threadIdx.x; e < rows * m; e += kRowThreads) {
    args.split.row(t0 + e / m)[e % m] = split_rows[(e / m) * kSplitStride + e % m];
  }
}

// Expanded value of element d of row t for destination stream c, from v (the block input) and
// the n source values x_d[r]; kFixedN > 0 unrolls n = kFixedN.
template <int kFixedN>
__device__ __forceinline__ float expand_destination(const hc::ExpandArgs& args, std::int64_t t,
                                                    int c, float v, const float* x_d) {
  const int n = kFixedN > 0 ? kFixedN : args.n_hc;
  float acc = v * args.post.at(t, c);
#pragma unroll
  for (int r = 0; r < n; ++r) acc = hc_accumulate(acc, args.comb.at(t, r, c), x_d[r]);
  return acc;
}

// x[t][r][d] for every source stream r.
template <int kFixedN>
__device__ __forceinline__ void load_sources(const hc::ExpandArgs& args, std::int64_t t,
                                             std::int64_t d, float* x_d) {
  const int n = kFixedN > 0 ? kFixedN : args.n_hc;
#pragma unroll
  for (int r = 0; r < n; ++r) x_d[r] = args.x.at(t, r)[d];
}

// Expands element d of row t into every destination stream.
template <int kFixedN>
__device__ __forceinline__ void expand_element(const hc::ExpandArgs& args, std::int64_t t,
                                               std::int64_t d, float v) {
  const int n = kFixedN > 0 ? kFixedN : args.n_hc;
  float x_d[kFixedN > 0 ? kFixedN : kMaxHcStreams];
  load_sources<kFixedN>(args, t, d, x_d);
#pragma unroll
  for (int c = 0; c < n; ++c) {
    args.out.at(t, c)[d] = expand_destination<kFixedN>(args, t, c, v, x_d);
  }
}

// Expands element d of row t into destination stream c only: n threads together do what
// expand_element does, with the same float operations, without one thread's store-then-load
// chain over the streams.
template <int kFixedN>
__device__ __forceinline__ void expand_element_into(const hc::ExpandArgs& args, std::int64_t t,
                                                    std::int64_t d, int c, float v) {
  float x_d[kFixedN > 0 ? kFixedN : kMaxHcStreams];
  load_sources<kFixedN>(args, t, d, x_d);
  args.out.at(t, c)[d] = expand_destination<kFixedN>(args, t, c, v, x_d);
}

}  // namespace turbodecode::cuda
