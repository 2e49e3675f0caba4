// Per-element HC math shared verbatim by the CPU backend and the CUDA kernels, so that a fused
// operator performs exactly the float operations of its unfused composition (SPEC §3). Every
// multiply-add is an explicit fmaf: the compiler never gets to choose between fused and
// separate roundings. The formulas themselves are stated once, in reference/hc_oracle.h.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/host_device.h"
#include "turbodecode/hc.h"

namespace turbodecode {

// A product the compiler may not fuse with a later addition (nvcc fuses aggressively; the
// host compiler never does in ISO C++ mode), so every context rounds it the same way.
TD_HOST_DEVICE float hc_mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// 1/x for the Sinkhorn normalisations. On the GPU the correctly rounded reciprocal costs a
// branchy slow-path check per call, and one thread runs 20 dependent rounds of them (docs/hc.md,
// "Tried, not kept"). The hardware approximation (rcp.approx.ftz, ≤ 1 ulp) is enough: the sums it
// inverts lie in [ε, n], far from subnormals and overflow. Fused and unfused kernels share this
// function, so they still agree bitwise; the CPU keeps 1/x.
TD_HOST_DEVICE float hc_reciprocal(float x) {
#ifdef __CUDA_ARCH__
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return 1.0f / x;
#endif
}

// Σ_k v[k·stride] for k < count. The n = 4 fast path adds in pairs, (v0 + v1) + (v2 + v3): two
// dependent additions instead of four on the Sinkhorn's critical path; other n add in
// ascending order.
template <int kFixedN>
TD_HOST_DEVICE float hc_line_sum(const float* v, int count, int stride) {
  if constexpr (kFixedN == 4) {
    return (v[0] + v[stride]) + (v[2 * stride] + v[3 * stride]);
  } else {
    float sum = v[0];
    for (int k = 1; k < count; ++k) sum += v[k * stride];
    return sum;
  }
}

// Logistic function that never exponentiates a positive number: finite and exact at the
// extremes (σ(±1e30) is 1 / 0), NaN only for NaN input.
TD_HOST_DEVICE float hc_sigmoid(float z) {
  const float e = expf(-fabsf(z));
  const float s = 1.0f / (1.0f + e);
  return z >= 0.0f ? s : hc_mul(e, s);
}

// Stream weight pre_h of a split (SPEC §3.1) from its logit z = m·s0 + β: σ(z) + ε.
TD_HOST_DEVICE float hc_pre_weight(float logit, float eps) {
  return hc_sigmoid(logit) + eps;
}

// One step of the weighted sums of collapse and expand: acc + w·x with a single rounding.
TD_HOST_DEVICE float hc_accumulate(float acc, float w, float x) {
  return fmaf(w, x, acc);
}

// The value an expand multiplies by post: the block output, plus the optional second input.
TD_HOST_DEVICE float hc_block_input(float block, const float* add, std::int64_t d) {
  return add != nullptr ? block + add[d] : block;
}

// 1/sqrt(mean + ε) of an RMSNorm from the row's sum of squares.
TD_HOST_DEVICE float hc_rms_scale(float sum_squares, std::int64_t width, float eps) {
  return 1.0f / sqrtf(sum_squares / static_cast<float>(width) + eps);
}

// normed = (u · rms_scale) · weight.
TD_HOST_DEVICE float hc_rms_apply(float u, float rms_scale, float weight) {
  return hc_mul(hc_mul(u, rms_scale), weight);
}

// Sinkhorn normalisation of the n×n matrix c (row-major): one pass over rows (dim 1) or
// columns (dim 0), each line divided by (its sum + ε), sums by hc_line_sum. Every
// line's sum is formed before any reciprocal, and every reciprocal before any product: the
// lines are independent, so one GPU thread overlaps their dependency chains (a reciprocal's
// correctly rounded path ends in a branch, which the compiler does not schedule across). Each
// value is computed exactly as line by line.
template <int kFixedN>
TD_HOST_DEVICE void hc_normalise_lines(float* c, int n, int line_stride, int element_stride,
                                       float eps) {
  const int count = kFixedN > 0 ? kFixedN : n;
  float inv[kFixedN > 0 ? kFixedN : kMaxHcStreams];
  for (int l = 0; l < count; ++l) {
    inv[l] = hc_line_sum<kFixedN>(c + l * line_stride, count, element_stride) + eps;
  }
  for (int l = 0; l < count; ++l) inv[l] = hc_reciprocal(inv[l]);
  for (int l = 0; l < count; ++l) {
    for (int k = 0; k < count; ++k) {
      c[l * line_stride + k * element_stride] =
          hc_mul(c[l * line_stride + k * element_stride], inv[l]);
    }
  }
}

template <int kFixedN>
TD_HOST_DEVICE void hc_normalise_rows(float* c, int n, float eps) {
  hc_normalise_lines<kFixedN>(c, n, kFixedN > 0 ? kFixedN : n, 1, eps);
}

template <int kFixedN>
TD_HOST_DEVICE void hc_normalise_columns(float* c, int n, float eps) {
  hc_normalise_lines<kFixedN>(c, n, 1, kFixedN > 0 ? kFixedN : n, eps);
}

// The Sinkhorn rounds on the n×n matrix c (row-major) once its rows are a softmax + ε: a column
// normalisation, then iters − 1 rounds of a row and a column normalisation.
template <int kFixedN>
TD_HOST_DEVICE void hc_sinkhorn_rounds(float* c, int n, int iters, float eps) {
  hc_normalise_columns<kFixedN>(c, n, eps);
  for (int it = 1; it < iters; ++it) {
    hc_normalise_rows<kFixedN>(c, n, eps);
    hc_normalise_columns<kFixedN>(c, n, eps);
  }
}

// The Sinkhorn of a split (SPEC §3.1): c holds the n×n comb logits (row-major) and becomes the
// comb matrix: a row softmax + ε, then hc_sinkhorn_rounds. split_row4_lanes
// (hc/cuda/hc_rows.cuh) is its lane-parallel form for n = 4, with the same float operations:
// lane r of a quad takes row r's softmax, then every lane runs the rounds on the whole matrix.
template <int kFixedN>
TD_HOST_DEVICE void hc_sinkhorn(float* c, int n, int iters, float eps) {
  const int count = kFixedN > 0 ? kFixedN : n;
  // Row softmax, + ε. Phase by phase over all rows, like hc_normalise_lines.
  float inv[kFixedN > 0 ? kFixedN : kMaxHcStreams];
  for (int r = 0; r < count; ++r) {
    float* row = c + r * count;
    float row_max = -INFINITY;
    for (int k = 0; k < count; ++k) row_max = fmaxf(row_max, row[k]);
    for (int k = 0; k < count; ++k) row[k] = expf(row[k] - row_max);
    inv[r] = hc_line_sum<kFixedN>(row, count, 1);
  }
  for (int r = 0; r < count; ++r) inv[r] = hc_reciprocal(inv[r]);
  for (int r = 0; r < count; ++r) {
    for (int k = 0; k < count; ++k) c[r * count + k] = fmaf(c[r * count + k], inv[r], eps);
  }
  hc_sinkhorn_rounds<kFixedN>(c, count, iters, eps);
}

// split of one row (SPEC §3.1): mix, base and out hold M = 2n + n² contiguous floats; scale
// holds s0, s1, s2. kFixedN > 0 compiles the n = kFixedN path with registers only; kFixedN = 0
// handles any n up to kMaxHcStreams. Every input is read before the first output is written:
// the compiler cannot rule out that out aliases an input, so on the GPU an interleaved read
// would wait for the store before it, one memory latency per value.
template <int kFixedN>
TD_HOST_DEVICE void hc_split_row(const float* mix, const float* scale, const float* base, int n,
                                 int iters, float eps, float* out) {
  const int count = kFixedN > 0 ? kFixedN : n;
  constexpr int kWidth = hc_mix_width(kFixedN > 0 ? kFixedN : kMaxHcStreams);
  const int comb = 2 * count;
  float z[kWidth];  // the logits m·s + β; the comb part becomes the Sinkhorn matrix in place
  for (int h = 0; h < count; ++h) {
    z[h] = fmaf(mix[h], scale[0], base[h]);
    z[count + h] = fmaf(mix[count + h], scale[1], base[count + h]);
  }
  for (int i = 0; i < count * count; ++i)
    z[comb + i] = fmaf(mix[comb + i], scale[2], base[comb + i]);
  float* c = z + comb;
  hc_sinkhorn<kFixedN>(c, count, iters, eps);
  for (int h = 0; h < count; ++h) {
    out[h] = hc_pre_weight(z[h], eps);
    out[count + h] = 2.0f * hc_sigmoid(z[count + h]);
  }
  for (int i = 0; i < count * count; ++i) out[comb + i] = c[i];
}

// The CPU backend's dispatch to the n = 4 fast path. CUDA kernels are templates on n instead,
// dispatched once at launch: a run-time branch inside a kernel would keep the general path's
// local array (a 1,152-byte stack frame) in every kernel that splits.
inline void hc_split_row_any(const float* mix, const float* scale, const float* base, int n,
                             int iters, float eps, float* out) {
  if (n == 4) {
    hc_split_row<4>(mix, scale, base, n, iters, eps, out);
  } else {
    hc_split_row<0>(mix, scale, base, n, iters, eps, out);
  }
}

// Output-head weight (SPEC §3.5).
TD_HOST_DEVICE float hc_head_weight(float logit, float scale, float base, float post_scale,
                                    float eps) {
  return post_scale * hc_sigmoid(fmaf(logit, scale, base)) + eps;
}

}  // namespace turbodecode
