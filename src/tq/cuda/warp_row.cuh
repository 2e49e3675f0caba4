// Warp-per-row building blocks of the row codec on CUDA (TurboQuant-HB and FP8 rows). One warp
// holds one row of D values: lane l owns the D/32 consecutive elements starting at l·D/32, so
// loads and stores are 16-byte vectors where alignment allows. Every rounding step comes from
// tq/codec_math.h and tq/fp8_math.h and runs in the CPU backend's order, so both encoders
// produce the same codes (SPEC §5).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/cuda/warp.cuh"
#include "tq/codec_math.h"
#include "tq/cuda/codec_tables.cuh"
#include "tq/fp8_math.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda::warp_row {

inline constexpr unsigned kFullMask = kFullWarpMask;
inline constexpr int kLanes = kWarpSize;

template <int D>
inline constexpr int kPerLane = D / kLanes;
template <int D>
inline constexpr int kNormsPerRow = D == 256 ? 1 : 2;

// ---- Memory access: N 32-bit words per lane, as vectors or as single bytes. ----

template <int N>
__device__ __forceinline__ void load_words(const unsigned char* src, bool vectorised,
                                           unsigned (&words)[N]) {
  if (vectorised) {
    if constexpr (N % 4 == 0) {
#pragma unroll
      for (int k = 0; k < N / 4; ++k) {
        const uint4 q = reinterpret_cast<const uint4*>(src)[k];
        words[4 * k] = q.x;
        words[4 * k + 1] = q.y;
        words[4 * k + 2] = q.z;
        words[4 * k + 3] = q.w;
      }
    } else if constexpr (N == 2) {
      const uint2 q = *reinterpret_cast<const uint2*>(src);
      words[0] = q.x;
      words[1] = q.y;
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) words[k] = reinterpret_cast<const unsigned*>(src)[k];
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < N; ++k) {
    words[k] = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) words[k] |= static_cast<unsigned>(src[4 * k + b]) << (8 * b);
  }
}

template <int N>
__device__ __forceinline__ void store_words(unsigned char* dst, const unsigned (&words)[N],
                                            bool vectorised) {
  if (vectorised) {
    if constexpr (N % 4 == 0) {
#pragma unroll
      for (int k = 0; k < N / 4; ++k) {
        reinterpret_cast<uint4*>(dst)[k] =
            make_uint4(words[4 * k], words[4 * k + 1], words[4 * k + 2], words[4 * k + 3]);
      }
    } else if constexpr (N == 2) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(words[0], words[1]);
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) reinterpret_cast<unsigned*>(dst)[k] = words[k];
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < N; ++k) {
#pragma unroll
    for (int b = 0; b < 4; ++b) dst[4 * k + b] = static_cast<unsigned char>(words[k] >> (8 * b));
  }
}

__device__ __forceinline__ float widen_16bit(unsigned bits, bool is_bf16) {
  return is_bf16 ? __uint_as_float(bits << 16)
                 : __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// This lane's E elements of a row of f32, f16 or bf16 values as W raw 32-bit words. W = E: one
// f32 per word, or two 16-bit values per word in words[0, E/2) (the rest zero). W = E/2 serves
// f16 and bf16 rows only, two values per word. Kernels that load rows ahead of using them keep
// these, the narrowest form.
template <int E, int W>
__device__ __forceinline__ void load_lane_words(const unsigned char* row, DType dtype,
                                                bool vectorised, int lane, unsigned (&words)[W]) {
  static_assert(W == E || 2 * W == E, "a word holds one f32 or two 16-bit values");
  if constexpr (W == E) {
    if (dtype == DType::f32) {
      load_words<E>(row + lane * E * 4, vectorised, words);
      return;
    }
  }
  unsigned pairs[E / 2];
  load_words<E / 2>(row + lane * E * 2, vectorised, pairs);
#pragma unroll
  for (int k = 0; k < E / 2; ++k) {
    words[k] = pairs[k];
    if constexpr (W == E) words[E / 2 + k] = 0u;
  }
}

// The f32 values of words from load_lane_words.
template <int E, int W>
__device__ __forceinline__ void widen_lane_words(const unsigned (&words)[W], DType dtype,
                                                 float (&v)[E]) {
  if constexpr (W == E) {
    if (dtype == DType::f32) {
#pragma unroll
      for (int r = 0; r < E; ++r) v[r] = __uint_as_float(words[r]);
      return;
    }
  }
  const bool is_bf16 = dtype == DType::bf16;
#pragma unroll
  for (int k = 0; k < E / 2; ++k) {
    v[2 * k] = widen_16bit(words[k] & 0xffffu, is_bf16);
    v[2 * k + 1] = widen_16bit(words[k] >> 16, is_bf16);
  }
}

// This lane's E elements of a row of f32, f16 or bf16 values, widened to f32.
template <int E>
__device__ __forceinline__ void load_lane_values(const unsigned char* row, DType dtype,
                                                 bool vectorised, int lane, float (&v)[E]) {
  unsigned words[E];
  load_lane_words<E, E>(row, dtype, vectorised, lane, words);
  widen_lane_words<E, E>(words, dtype, v);
}

template <int E>
__device__ __forceinline__ void store_lane_f32(const float (&v)[E], unsigned char* row, int lane,
                                               bool vectorised) {
  unsigned words[E];
#pragma unroll
  for (int r = 0; r < E; ++r) words[r] = __float_as_uint(v[r]);
  store_words<E>(row + lane * E * 4, words, vectorised);
}

// Rounds to nearest even, as the CPU backend's f32_to_f16 does.
template <int E>
__device__ __forceinline__ void store_lane_f16(const float (&v)[E], unsigned char* row, int lane,
                                               bool vectorised) {
  unsigned words[E / 2];
#pragma unroll
  for (int k = 0; k < E / 2; ++k) {
    const unsigned low = __half_as_ushort(__float2half_rn(v[2 * k]));
    const unsigned high = __half_as_ushort(__float2half_rn(v[2 * k + 1]));
    words[k] = low | (high << 16);
  }
  store_words<E / 2>(row + lane * E * 2, words, vectorised);
}

// ---- Rotation R_D (SPEC §1.1). ----

// Bit r set when this lane's element r is negated: the lane's D/256 bytes of the sign mask.
// It depends only on the lane, so kernels load it once, before their row loops.
template <int D>
__device__ __forceinline__ unsigned lane_sign_bits(int lane) {
  constexpr int E = kPerLane<D>;
  unsigned bits = 0;
#pragma unroll
  for (int b = 0; b < E / 8; ++b) {
    bits |= static_cast<unsigned>(tq_tables::kSignMask[lane * (E / 8) + b]) << (8 * b);
  }
  return bits;
}

// The unnormalised natural-order transform, stages of stride 1, 2, ..., D/2 in that order.
// Strides below E pair registers of one lane; larger ones pair lanes lane_stride = stride/E
// apart, the lower lane keeping low + high and the upper one low − high, exactly
// tq::butterfly's two results: one fused multiply-add by ±1 gives either, rounded once like
// the plain sum or difference, since the product by ±1 is exact.
template <int E>
__device__ __forceinline__ void walsh_hadamard(float (&v)[E], int lane) {
#pragma unroll
  for (int stride = 1; stride < E; stride <<= 1) {
#pragma unroll
    for (int r = 0; r < E; ++r) {
      if ((r & stride) == 0) tq::butterfly(v[r], v[r + stride]);
    }
  }
#pragma unroll
  for (int lane_stride = 1; lane_stride < kLanes; lane_stride <<= 1) {
    const float own_sign = (lane & lane_stride) == 0 ? 1.0f : -1.0f;
#pragma unroll
    for (int r = 0; r < E; ++r) {
      const float other = __shfl_xor_sync(kFullMask, v[r], lane_stride);
      v[r] = fmaf(own_sign, v[r], other);
    }
  }
}

// `signs`: lane_sign_bits<D>(lane).
template <int D>
__device__ __forceinline__ void rotate_forward(float (&v)[kPerLane<D>], int lane, unsigned signs) {
  constexpr int E = kPerLane<D>;
#pragma unroll
  for (int r = 0; r < E; ++r) v[r] = tq::apply_sign(v[r], (signs >> r) & 1u);
  walsh_hadamard<E>(v, lane);
  const float scale = tq::rotation_scale(D);
#pragma unroll
  for (int r = 0; r < E; ++r) v[r] *= scale;
}

template <int D>
__device__ __forceinline__ void rotate_inverse(float (&v)[kPerLane<D>], int lane, unsigned signs) {
  constexpr int E = kPerLane<D>;
  walsh_hadamard<E>(v, lane);
  const float scale = tq::rotation_scale(D);
#pragma unroll
  for (int r = 0; r < E; ++r) v[r] = tq::apply_sign(v[r] * scale, (signs >> r) & 1u);
}

// ---- Norms and codes (SPEC §1.2). ----

// Sum of squares of each norm segment (the row for D = 256, each half for D = 512) in the
// canonical order of codec_math.h: partial p takes segment elements p, p + 32, ... in order,
// then an xor-shuffle tree (which leaves the same sum in every lane). Partial p must live in
// lane p, so the row is transposed through `scratch` (D floats, this warp's own).
template <int D>
__device__ __forceinline__ void segment_sums_of_squares(const float (&y)[kPerLane<D>],
                                                        float* scratch, int lane,
                                                        float (&sums)[kNormsPerRow<D>]) {
  constexpr int E = kPerLane<D>;
  constexpr int kSegment = D / kNormsPerRow<D>;
#pragma unroll
  for (int k = 0; k < E / 4; ++k) {
    reinterpret_cast<float4*>(scratch + lane * E)[k] =
        make_float4(y[4 * k], y[4 * k + 1], y[4 * k + 2], y[4 * k + 3]);
  }
  __syncwarp();
#pragma unroll
  for (int s = 0; s < kNormsPerRow<D>; ++s) {
    float partial = 0.0f;
#pragma unroll
    for (int i = 0; i < kSegment / kLanes; ++i) {
      partial = tq::add_square(partial, scratch[s * kSegment + lane + kLanes * i]);
    }
    sums[s] = butterfly_sum<kLanes>(partial);
  }
  __syncwarp();  // the caller may reuse `scratch` for the next row
}

// Stores this lane's E codes into the warp's row `codes` as SPEC §1.5's bit stream: lane l's
// codes fill bytes [l·E·bits/8, (l + 1)·E·bits/8), eight codes to `bits` bytes. 4- and 8-bit
// lanes own whole 32-bit words and store them directly. 3-, 5- and 6-bit lanes own bytes that
// straddle words, so the warp assembles its row in `scratch` (this warp's D floats, free again
// after segment_sums_of_squares) and copies it out in 16-byte vectors (rows are 32·E·bits/8
// bytes, a multiple of 16).
template <int D>
__device__ __forceinline__ void store_codes(const int (&code)[kPerLane<D>], int bits,
                                            float* scratch, int lane, unsigned char* codes,
                                            bool vectorised) {
  constexpr int E = kPerLane<D>;
  if (bits == 4) {
    unsigned words[E / 8] = {};
#pragma unroll
    for (int b = 0; b < E / 2; ++b) {
      words[b / 4] |= static_cast<unsigned>(tq::pack_nibbles(code[2 * b], code[2 * b + 1]))
                      << (8 * (b % 4));
    }
    store_words<E / 8>(codes + lane * (E / 2), words, vectorised);
    return;
  }
  if (bits == 8) {
    unsigned words[E / 4] = {};
#pragma unroll
    for (int r = 0; r < E; ++r) words[r / 4] |= static_cast<unsigned>(code[r]) << (8 * (r % 4));
    store_words<E / 4>(codes + lane * E, words, vectorised);
    return;
  }
  auto* staged = reinterpret_cast<unsigned char*>(scratch);
  const int lane_bytes = E / 8 * bits;
#pragma unroll
  for (int g = 0; g < E / 8; ++g) {
    unsigned long long group = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      group |= static_cast<unsigned long long>(code[8 * g + i]) << (bits * i);
    }
    for (int k = 0; k < bits; ++k) {
      staged[lane * lane_bytes + g * bits + k] = static_cast<unsigned char>(group >> (8 * k));
    }
  }
  __syncwarp();
  const int row_bytes = kLanes * lane_bytes;
  if (vectorised) {
    if (lane < row_bytes / 16) {
      reinterpret_cast<uint4*>(codes)[lane] = reinterpret_cast<const uint4*>(staged)[lane];
    }
  } else {
    for (int b = lane; b < row_bytes; b += kLanes) codes[b] = staged[b];
  }
  __syncwarp();  // the caller may reuse `scratch` for the next row
}

// A row encoded in registers, not yet stored: this lane's codes and the row's norms.
template <int D>
struct TqLaneCodes {
  int code[kPerLane<D>];
  float norms[kNormsPerRow<D>];
};

// Encodes this warp's rotated row y. `buckets` is the bucket table of `bits`-bit codes
// (tq_tables::fill_code_buckets); `scratch` is this warp's D floats of shared memory.
template <int D>
__device__ __forceinline__ TqLaneCodes<D> encode_rotated(const float (&y)[kPerLane<D>], int bits,
                                                         float scale_factor_d512,
                                                         const code_buckets::CodeBucket* buckets,
                                                         float* scratch, int lane) {
  constexpr int E = kPerLane<D>;
  TqLaneCodes<D> out;
  float sums[kNormsPerRow<D>];
  segment_sums_of_squares<D>(y, scratch, lane, sums);
  float factor;
  if constexpr (D == 256) {
    out.norms[0] = tq::d256_norm(sums[0]);
    factor = tq::d256_encode_scale(out.norms[0]);
  } else {
    out.norms[0] = tq::d512_half_norm(sums[0]);
    out.norms[1] = tq::d512_half_norm(sums[1]);
    // A lane's E elements lie in one half: lanes 0..15 the first, 16..31 the second.
    factor = tq::d512_encode_scale(lane < kLanes / 2 ? out.norms[0] : out.norms[1],
                                   scale_factor_d512);
  }
  const code_buckets::BucketGrid grid = code_buckets::grid_for_bits(bits);
#pragma unroll
  for (int r = 0; r < E; ++r) {
    out.code[r] = code_buckets::code_in_buckets(y[r] * factor, buckets, grid);
  }
  return out;
}

// Stores an encoded row: the lane's codes to `codes` (the row's first byte), the norms to
// `norms` from lane 0.
template <int D>
__device__ __forceinline__ void store_rotated(const TqLaneCodes<D>& row, int bits, float* scratch,
                                              int lane, unsigned char* codes, float* norms,
                                              bool vectorised) {
  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < kNormsPerRow<D>; ++s) norms[s] = row.norms[s];
  }
  store_codes<D>(row.code, bits, scratch, lane, codes, vectorised);
}

// This lane's E decoded (rotated-basis) values of a row: centroid × the segment's decode scale.
// `codebook` holds the 2^bits centroids.
template <int D>
__device__ __forceinline__ void decode_lane(const unsigned char* codes, const float* norms,
                                            int bits, float scale_factor_d512,
                                            const float* codebook, int lane, bool vectorised,
                                            float (&y)[kPerLane<D>]) {
  constexpr int E = kPerLane<D>;
  float scale;
  if constexpr (D == 256) {
    scale = tq::d256_decode_scale(norms[0]);
  } else {
    scale = tq::d512_decode_scale(norms[lane < kLanes / 2 ? 0 : 1], scale_factor_d512);
  }
  if (bits == 4) {
    unsigned words[E / 8];
    load_words<E / 8>(codes + lane * (E / 2), vectorised, words);
#pragma unroll
    for (int r = 0; r < E; ++r) {
      const auto byte = static_cast<unsigned char>(words[r / 8] >> (8 * ((r / 2) % 4)));
      y[r] = codebook[tq::unpack_nibble(byte, r)] * scale;
    }
  } else if (bits == 8) {
    unsigned words[E / 4];
    load_words<E / 4>(codes + lane * E, vectorised, words);
#pragma unroll
    for (int r = 0; r < E; ++r) y[r] = codebook[(words[r / 4] >> (8 * (r % 4))) & 0xffu] * scale;
  } else {
#pragma unroll
    for (int r = 0; r < E; ++r) y[r] = codebook[tq::read_code(codes, bits, lane * E + r)] * scale;
  }
}

// ---- FP8 E4M3 rows (SPEC §1.6): not rotated, one scale per row. ----

// An FP8 row encoded in registers: this lane's codes, four to a word, and the row's scale.
template <int D>
struct Fp8LaneCodes {
  unsigned words[kPerLane<D> / 4];
  float scale;
};

// Encodes this warp's row x. The largest magnitude comes from a warp max, which no order of
// reduction changes (and which skips NaN, as fmaxf does), so the scale and every code equal the
// CPU backend's.
template <int D>
__device__ __forceinline__ Fp8LaneCodes<D> encode_fp8(const float (&x)[kPerLane<D>]) {
  constexpr int E = kPerLane<D>;
  float amax = 0.0f;
#pragma unroll
  for (int r = 0; r < E; ++r) amax = fmaxf(amax, fabsf(x[r]));
  amax = warp_max(amax);
  Fp8LaneCodes<D> out{{}, fp8::row_scale(amax)};
#pragma unroll
  for (int r = 0; r < E; ++r) {
    out.words[r / 4] |= static_cast<unsigned>(fp8::encode(x[r], out.scale)) << (8 * (r % 4));
  }
  return out;
}

// Stores an encoded row: codes to `codes` (the row's first byte), the scale to `scale` from
// lane 0.
template <int D>
__device__ __forceinline__ void store_fp8(const Fp8LaneCodes<D>& row, int lane,
                                          unsigned char* codes, float* scale, bool vectorised) {
  if (lane == 0) *scale = row.scale;
  store_words<kPerLane<D> / 4>(codes + lane * kPerLane<D>, row.words, vectorised);
}

// This lane's E decoded values of an FP8 row: scale × the E4M3 value.
template <int D>
__device__ __forceinline__ void decode_fp8_lane(const unsigned char* codes, float scale, int lane,
                                                bool vectorised, float (&y)[kPerLane<D>]) {
  constexpr int E = kPerLane<D>;
  unsigned words[E / 4];
  load_words<E / 4>(codes + lane * E, vectorised, words);
#pragma unroll
  for (int r = 0; r < E; ++r) {
    y[r] = scale * fp8::decode(static_cast<unsigned char>(words[r / 4] >> (8 * (r % 4))));
  }
}

}  // namespace turbodecode::cuda::warp_row
