// Block-level row routines shared by the standalone HC kernels and the fused ones (HC-pre,
// split + collapse + norm), so that fused and unfused launches do identical float operations:
// every routine gives a thread the same quads of a row (see kQuad) and reduces in a fixed order.
#pragma once

#include <cstdint>

#include "common/cuda/warp.cuh"
#include "hc/hc_args.h"
#include "hc/hc_math.h"

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

// The row routines below take a row's elements in quads: thread i owns elements 4q .. 4q + 3
// for quads q = i, i + 256, …, and a sum of squares runs over the thread's quads in order and
// over a quad's elements in order. A quad is one 16-byte access where the row allows it and four
// scalar ones otherwise: the same values in the same order either way, so results do not depend
// on alignment. (One element per thread and pass keeps too many scalar loads per thread in
// flight: docs/hc.md, "Tried, not kept".)
inline constexpr int kQuad = 4;
inline constexpr int kQuadStride = kQuad * kRowThreads;  // elements between a thread's quads

struct Quad {
  float v[kQuad];
};

__device__ __forceinline__ std::int64_t quad_first(int q) {
  return kQuad * (static_cast<std::int64_t>(threadIdx.x) + std::int64_t{q} * kRowThreads);
}

__device__ __forceinline__ bool whole_aligned_quad(const float* row, std::int64_t d,
                                                   std::int64_t width) {
  return d + kQuad <= width && reinterpret_cast<std::uintptr_t>(row + d) % 16 == 0;
}

// Elements d .. d + 3 of row (zero past width). kReadOnly: through the read-only cache (inputs
// of the launch; not rows the kernel writes).
template <bool kReadOnly>
__device__ __forceinline__ Quad load_quad(const float* row, std::int64_t d, std::int64_t width) {
  Quad q;
  if (whole_aligned_quad(row, d, width)) {
    const float4* p = reinterpret_cast<const float4*>(row + d);
    const float4 v = kReadOnly ? __ldg(p) : *p;
    q = {{v.x, v.y, v.z, v.w}};
    return q;
  }
#pragma unroll
  for (int c = 0; c < kQuad; ++c) {
    q.v[c] = d + c < width ? (kReadOnly ? __ldg(row + d + c) : row[d + c]) : 0.0f;
  }
  return q;
}

__device__ __forceinline__ void store_quad(float* row, std::int64_t d, std::int64_t width,
                                           const Quad& q) {
  if (whole_aligned_quad(row, d, width)) {
    *reinterpret_cast<float4*>(row + d) = make_float4(q.v[0], q.v[1], q.v[2], q.v[3]);
    return;
  }
#pragma unroll
  for (int c = 0; c < kQuad; ++c) {
    if (d + c < width) row[d + c] = q.v[c];
  }
}

// Quads d .. d + 3 of row t of every stream, n = kN.
template <int kN>
__device__ __forceinline__ void load_stream_quads(const hc::CollapseArgs& args, std::int64_t t,
                                                  std::int64_t d, Quad (&x)[kN]) {
#pragma unroll
  for (int h = 0; h < kN; ++h) x[h] = load_quad<true>(args.x.at(t, h), d, args.embd);
}

// acc + pre[h]·x for the elements of one stream's quad (a step of collapse_element).
__device__ __forceinline__ void accumulate_stream_quad(Quad& acc, float pre, const Quad& x) {
#pragma unroll
  for (int c = 0; c < kQuad; ++c) acc.v[c] = hc_accumulate(acc.v[c], pre, x.v[c]);
}

// Collapsed elements from the quads of n = kN streams, h ascending.
template <int kN>
__device__ __forceinline__ Quad collapse_stream_quads(const float* pre, const Quad (&x)[kN]) {
  Quad acc = {};
#pragma unroll
  for (int h = 0; h < kN; ++h) accumulate_stream_quad(acc, pre[h], x[h]);
  return acc;
}

// Elements d .. d + 3 of collapsed row t (each as collapse_element: h ascending); kFixedN > 0
// loads all streams' quads first, so that their loads are in flight together.
template <int kFixedN>
__device__ __forceinline__ Quad collapse_quad(const hc::CollapseArgs& args, const float* pre,
                                              std::int64_t t, std::int64_t d) {
  if constexpr (kFixedN > 0) {
    Quad x[kFixedN];
    load_stream_quads(args, t, d, x);
    return collapse_stream_quads(pre, x);
  } else {
    Quad acc = {};
    for (int h = 0; h < args.n_hc; ++h) {
      accumulate_stream_quad(acc, pre[h], load_quad<true>(args.x.at(t, h), d, args.embd));
    }
    return acc;
  }
}

// The thread's sum of squares of quad q, added to `squares` element by element.
__device__ __forceinline__ float add_quad_squares(const Quad& u, std::int64_t d, std::int64_t width,
                                                  float squares) {
#pragma unroll
  for (int c = 0; c < kQuad; ++c) {
    if (d + c < width) squares = fmaf(u.v[c], u.v[c], squares);
  }
  return squares;
}

__device__ __forceinline__ Quad rms_apply_quad(const Quad& u, float scale, const Quad& weight) {
  Quad out;
#pragma unroll
  for (int c = 0; c < kQuad; ++c) out.v[c] = hc_rms_apply(u.v[c], scale, weight.v[c]);
  return out;
}

// collapsed row t by one block (pre: n values in shared or global memory).
__device__ __forceinline__ void collapse_row_block(const hc::CollapseArgs& args, const float* pre,
                                                   std::int64_t t) {
  float* out = args.out.row(t);
#pragma unroll 2
  for (std::int64_t d = quad_first(0); d < args.embd; d += kQuadStride) {
    store_quad(out, d, args.embd, collapse_quad<0>(args, pre, t, d));
  }
}

// Weighted RMSNorm of row u (each thread reads back only the elements it owns, so u may have
// just been written by the same threads).
__device__ __forceinline__ void rms_norm_row_block(const hc::RmsNormArgs& args, const float* u,
                                                   std::int64_t t, float* scratch) {
  float squares = 0.0f;
#pragma unroll 2
  for (std::int64_t d = quad_first(0); d < args.embd; d += kQuadStride) {
    squares = add_quad_squares(load_quad<false>(u, d, args.embd), d, args.embd, squares);
  }
  const float scale = hc_rms_scale(block_sum(squares, scratch), args.embd, args.eps);
  float* out = args.out.row(t);
#pragma unroll 2
  for (std::int64_t d = quad_first(0); d < args.embd; d += kQuadStride) {
    const Quad weight = load_quad<true>(args.weight, d, args.embd);
    store_quad(out, d, args.embd, rms_apply_quad(load_quad<false>(u, d, args.embd), scale, weight));
  }
}

// collapse then RMSNorm of row t with the collapsed row kept in registers (up to kCachedQuads
// quads per thread): the same float operations, in the same order, as collapse_row_block
// followed by rms_norm_row_block, with every load of x and of the norm weight issued up front;
// kFixedN > 0 unrolls the streams.
inline constexpr int kCachedQuads = 6;  // E up to 6144 (DeepSeek-V4.1: 5120)

template <int kFixedN, int kQuads = kCachedQuads>
__device__ __forceinline__ void collapse_norm_cached(const hc::CollapseArgs& collapse,
                                                     const hc::RmsNormArgs& norm, const float* pre,
                                                     std::int64_t t, float* scratch) {
  const std::int64_t e = collapse.embd;
  Quad u[kQuads];
  Quad weight[kQuads];  // loaded before the reduction, so it hides their latency
#pragma unroll
  for (int q = 0; q < kQuads; ++q) {
    const std::int64_t d = quad_first(q);
    const bool inside = d < e;
    u[q] = inside ? collapse_quad<kFixedN>(collapse, pre, t, d) : Quad{};
    weight[q] = inside ? load_quad<true>(norm.weight, d, e) : Quad{};
  }
  float* out = collapse.out.row(t);
  float squares = 0.0f;
#pragma unroll
  for (int q = 0; q < kQuads; ++q) {
    const std::int64_t d = quad_first(q);
    if (d < e) {
      store_quad(out, d, e, u[q]);
      squares = add_quad_squares(u[q], d, e, squares);
    }
  }
  const float scale = hc_rms_scale(block_sum(squares, scratch), norm.embd, norm.eps);
  float* normed = norm.out.row(t);
#pragma unroll
  for (int q = 0; q < kQuads; ++q) {
    const std::int64_t d = quad_first(q);
    if (d < e) store_quad(normed, d, e, rms_apply_quad(u[q], scale, weight[q]));
  }
}

// Rows too wide to cache take the two block routines one after the other: the same results,
// so a kernel may cache fewer quads (kQuads) to stay within its registers.
template <int kFixedN, int kQuads = kCachedQuads>
__device__ __forceinline__ void collapse_norm_row_block(const hc::CollapseArgs& collapse,
                                                        const hc::RmsNormArgs& norm,
                                                        const float* pre, std::int64_t t,
                                                        float* scratch) {
  if (collapse.embd > kQuads * kQuadStride) {
    collapse_row_block(collapse, pre, t);
    rms_norm_row_block(norm, collapse.out.row(t), t, scratch);
  } else {
    collapse_norm_cached<kFixedN, kQuads>(collapse, norm, pre, t, scratch);
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

// split of one n = 4 row by the four lanes of an aligned lane quad of a warp (every lane of the
// warp calls it, each quad with its own row), into out[0 .. M) when `write`: the float
// operations of hc_split_row<4>, with hc_sinkhorn<4> in its lane-parallel form. Lane r of a quad
// computes the logits, stream weights and row softmax of comb row r, the parts with the long
// exponentials and divisions; then every lane of the quad gathers the whole matrix and runs
// hc_sinkhorn_rounds on it itself, so no shuffle lies on the rounds' dependent chain (docs/hc.md,
// "Tried, not kept": a butterfly per column sum).
__device__ __forceinline__ void split_row4_lanes(const float* mix, const float* scale,
                                                 const float* base, int iters, float eps,
                                                 float* out, bool write) {
  constexpr int kN = 4;
  constexpr int kComb = 2 * kN;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int r = lane % kN;
  float c[kN];
  for (int k = 0; k < kN; ++k)
    c[k] = fmaf(mix[kComb + kN * r + k], scale[2], base[kComb + kN * r + k]);
  const float pre = hc_pre_weight(fmaf(mix[r], scale[0], base[r]), eps);
  const float post = 2.0f * hc_sigmoid(fmaf(mix[kN + r], scale[1], base[kN + r]));
  // Row softmax, + ε.
  float row_max = -INFINITY;
  for (int k = 0; k < kN; ++k) row_max = fmaxf(row_max, c[k]);
  for (int k = 0; k < kN; ++k) c[k] = expf(c[k] - row_max);
  const float inv = hc_reciprocal(hc_line_sum<kN>(c, kN, 1));
  float matrix[kN * kN];
  for (int k = 0; k < kN; ++k) c[k] = fmaf(c[k], inv, eps);
  for (int row = 0; row < kN; ++row) {
    for (int k = 0; k < kN; ++k)
      matrix[kN * row + k] = __shfl_sync(kFullWarpMask, c[k], (lane & ~(kN - 1)) | row);
  }
  hc_sinkhorn_rounds<kN>(matrix, kN, iters, eps);
  if (write) {
    out[r] = pre;
    out[kN + r] = post;
    for (int k = 0; k < kN; ++k) {
      // Row r, picked without indexing the register array by a run-time value.
      const float value = r == 0   ? matrix[k]
                          : r == 1 ? matrix[kN + k]
                          : r == 2 ? matrix[2 * kN + k]
                                   : matrix[3 * kN + k];
      out[kComb + kN * r + k] = value;
    }
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
