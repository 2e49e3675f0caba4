// AVX2/F16C row primitives of the CPU decode kernel: widening F16 rows, codebook lookups of
// TQ codes, dot products and scaled accumulation. Row lengths are multiples of 32. Each
// function sums in one fixed order, so results never depend on which thread runs them.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tq/fp8_math.h"

namespace turbodecode::attention::simd {

// Eight F16 values as f32.
inline __m256 load_f16(const std::uint16_t* source) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(source)));
}

// Eight codes starting at element j (a multiple of 8) as i32 lanes. 4-bit rows pack two codes
// per byte (even element in the low nibble), 8-bit rows one per byte; 5- and 6-bit rows are a
// little-endian bit stream (SPEC §1.5) in which codes j … j + 7 fill exactly Bits bytes: the
// low four come from the first 32 bits of those bytes, the high four from the 32 bits starting
// at bit 4·Bits.
template <int Bits>
inline __m256i load_codes(const std::uint8_t* row, int j) {
  if constexpr (Bits == 4) {
    std::int32_t packed;
    std::memcpy(&packed, row + j / 2, sizeof packed);
    const __m256i bytes = _mm256_cvtepu8_epi32(_mm_cvtsi32_si128(packed));
    const __m256i pairs =
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
    const __m256i nibbles = _mm256_srlv_epi32(pairs, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
    return _mm256_and_si256(nibbles, _mm256_set1_epi32(0x0f));
  } else if constexpr (Bits == 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + j));
    return _mm256_cvtepu8_epi32(bytes);
  } else {
    std::uint64_t group = 0;
    std::memcpy(&group, row + j / 8 * Bits, Bits);
    const auto low = static_cast<std::int32_t>(group);
    const auto high = static_cast<std::int32_t>(group >> (4 * Bits));
    const __m256i words = _mm256_setr_epi32(low, low, low, low, high, high, high, high);
    const __m256i codes = _mm256_srlv_epi32(
        words, _mm256_setr_epi32(0, Bits, 2 * Bits, 3 * Bits, 0, Bits, 2 * Bits, 3 * Bits));
    return _mm256_and_si256(codes, _mm256_set1_epi32((1 << Bits) - 1));
  }
}

// codebook[code] of the eight codes starting at element j: TQ values before the norm scale.
// AVX2 gathers: measured here at 35 ns per 256-code row against 63 ns for scalar loads.
template <int Bits>
inline __m256 lookup_codes(const std::uint8_t* row, const float* codebook, int j) {
  return _mm256_i32gather_ps(codebook, load_codes<Bits>(row, j), 4);
}

// Readers of one stored row format: load(row, j) gives elements [j, j + 8) of the row at
// `row` as f32, before any norm scale.
struct F16Reader {
  __m256 load(const std::uint8_t* row, int j) const {
    return load_f16(reinterpret_cast<const std::uint16_t*>(row) + j);
  }
};

template <int Bits>
struct CodeReader {
  const float* codebook;
  __m256 load(const std::uint8_t* row, int j) const { return lookup_codes<Bits>(row, codebook, j); }
};

// The 16-entry 4-bit codebook fits in two registers: a lookup is two permutes and a blend on
// bit 3 of the code, which leaves the load ports to the rows themselves. (With four
// registers, 5-bit codes measured slower this way than with a gather.)
template <>
struct CodeReader<4> {
  explicit CodeReader(const float* codebook)
      : low(_mm256_loadu_ps(codebook)), high(_mm256_loadu_ps(codebook + 8)) {}
  __m256 low, high;
  __m256 load(const std::uint8_t* row, int j) const {
    const __m256i codes = load_codes<4>(row, j);
    const __m256 bit3_in_sign = _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28));
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(low, codes),
                            _mm256_permutevar8x32_ps(high, codes), bit3_in_sign);
  }
};

// FP8 E4M3 rows (SPEC §1.6): the byte's exact E4M3 value, before the row scale.
struct Fp8Reader {
  __m256 load(const std::uint8_t* row, int j) const {
    alignas(32) float values[8];
    for (int e = 0; e < 8; ++e) values[e] = fp8::decode(row[j + e]);
    return _mm256_load_ps(values);
  }
};

// Lane h = the sum of the eight lanes of acc[h], for Heads <= 4 rows reduced side by side:
// each sum adds (v_i + v_i+4) pairwise in one fixed order, the same for any Heads.
template <int Heads>
inline __m128 horizontal_sums(const __m256* acc) {
  __m128 pairs[4];
  for (int h = 0; h < 4; ++h) {
    pairs[h] = h < Heads
                   ? _mm_add_ps(_mm256_castps256_ps128(acc[h]), _mm256_extractf128_ps(acc[h], 1))
                   : _mm_setzero_ps();
  }
  // [a0+a2, b0+b2, a1+a3, b1+b3] for heads a, b and likewise c, d; then the two halves.
  const __m128 ab =
      _mm_add_ps(_mm_unpacklo_ps(pairs[0], pairs[1]), _mm_unpackhi_ps(pairs[0], pairs[1]));
  if constexpr (Heads <= 2) return _mm_add_ps(ab, _mm_movehl_ps(ab, ab));
  const __m128 cd =
      _mm_add_ps(_mm_unpacklo_ps(pairs[2], pairs[3]), _mm_unpackhi_ps(pairs[2], pairs[3]));
  return _mm_add_ps(_mm_movelh_ps(ab, cd), _mm_movehl_ps(cd, ab));
}

// Lane h of dots[r] = Σ_{j in [begin, begin + count)} q[h][j] · row_r[j] for Heads query rows
// against Rows stored rows: each chunk of q loaded once for all rows, each row chunk once for
// all heads. Every (row, head) sum runs over the same kDotChains accumulator chains in the same
// order whatever Heads and Rows are, so a score never depends on which other heads or rows
// share its block (a query row scores alike alone and in a run, SPEC §2.8); count is a
// multiple of 8 · kDotChains.
inline constexpr int kDotChains = 2;
static_assert(kDotChains == 2, "dot_rows folds exactly two chains");

template <int Heads, int Rows, class Reader>
inline void dot_rows(const Reader& reader, const std::uint8_t* const* rows, const float* const* q,
                     int begin, int count, __m128* dots) {
  __m256 acc[Rows][kDotChains][Heads];
  for (int r = 0; r < Rows; ++r) {
    for (int c = 0; c < kDotChains; ++c) {
      for (int h = 0; h < Heads; ++h) acc[r][c][h] = _mm256_setzero_ps();
    }
  }
  for (int j = begin; j < begin + count; j += 8 * kDotChains) {
    for (int c = 0; c < kDotChains; ++c) {
      __m256 k[Rows];
      for (int r = 0; r < Rows; ++r) k[r] = reader.load(rows[r], j + 8 * c);
      for (int h = 0; h < Heads; ++h) {
        const __m256 query = _mm256_loadu_ps(q[h] + j + 8 * c);
        for (int r = 0; r < Rows; ++r) acc[r][c][h] = _mm256_fmadd_ps(query, k[r], acc[r][c][h]);
      }
    }
  }
  for (int r = 0; r < Rows; ++r) {
    for (int h = 0; h < Heads; ++h) acc[r][0][h] = _mm256_add_ps(acc[r][0][h], acc[r][1][h]);
    dots[r] = horizontal_sums<Heads>(acc[r][0]);
  }
}

// y += w·x.
inline void axpy(float w, const float* x, float* y, int count) {
  const __m256 weight = _mm256_set1_ps(w);
  for (int j = 0; j < count; j += 8) {
    _mm256_storeu_ps(y + j,
                     _mm256_fmadd_ps(weight, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
  }
}

// o_h[j] += Σ_{t in [begin[h], end[h])} coefs[h·coef_stride + t] · value(t, j) for Heads rows
// o_h and j in [0, count), positions t in order, one fused multiply-add each: the same
// rounding as one axpy per position, with each o_h chunk kept in registers across the whole
// tile. value(t, j) gives elements [j, j + 8) of position t's row, asked for once per t of the
// union of the heads' ranges. A position outside a head's range is skipped, not weighted by 0,
// so a head never meets another head's positions (not even a NaN there). Heads · Chunks
// accumulators hide the FMA latency; count is a multiple of 8 · Chunks.
template <int Heads, int Chunks, class Values>
inline void accumulate_tile(const Values& value, const int* begin, const int* end,
                            const float* coefs, int coef_stride, float* const* o, int count) {
  int first = begin[0], last = end[0], shared_first = begin[0], shared_last = end[0];
  for (int h = 1; h < Heads; ++h) {
    first = std::min(first, begin[h]);
    last = std::max(last, end[h]);
    shared_first = std::max(shared_first, begin[h]);
    shared_last = std::min(shared_last, end[h]);
  }
  for (int j = 0; j < count; j += 8 * Chunks) {
    __m256 acc[Heads][Chunks];
    for (int h = 0; h < Heads; ++h) {
      for (int c = 0; c < Chunks; ++c) acc[h][c] = _mm256_loadu_ps(o[h] + j + 8 * c);
    }
    for (int t = first; t < last; ++t) {
      __m256 v[Chunks];
      for (int c = 0; c < Chunks; ++c) v[c] = value(t, j + 8 * c);
      const bool every_head = t >= shared_first && t < shared_last;
      for (int h = 0; h < Heads; ++h) {
        if (!every_head && (t < begin[h] || t >= end[h])) continue;
        const __m256 w = _mm256_broadcast_ss(coefs + h * coef_stride + t);
        for (int c = 0; c < Chunks; ++c) acc[h][c] = _mm256_fmadd_ps(w, v[c], acc[h][c]);
      }
    }
    for (int h = 0; h < Heads; ++h) {
      for (int c = 0; c < Chunks; ++c) _mm256_storeu_ps(o[h] + j + 8 * c, acc[h][c]);
    }
  }
}

// y *= c.
inline void scale(float c, float* y, int count) {
  const __m256 factor = _mm256_set1_ps(c);
  for (int j = 0; j < count; j += 8) {
    _mm256_storeu_ps(y + j, _mm256_mul_ps(factor, _mm256_loadu_ps(y + j)));
  }
}

// max_t x_t, or NaN when any x_t is NaN (a NaN score must reach the output, SPEC §7).
inline float max(const float* x, int count) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  __m256 nan = _mm256_setzero_ps();
  for (int j = 0; j < count; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    m = _mm256_max_ps(m, v);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  if (_mm256_movemask_ps(nan) != 0) return NAN;
  const __m128 pair = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  const __m128 quad = _mm_max_ps(pair, _mm_movehl_ps(pair, pair));
  return _mm_cvtss_f32(_mm_max_ss(quad, _mm_movehdup_ps(quad)));
}

// x_t ← exp(x_t − shift), count a multiple of 8. Cephes-style: 2^n · p(r) with r = x − n·ln2
// split in two constants, a degree-6 polynomial (≈ 1 ulp). Results below e^-87 (including
// x = −inf) are 0; NaN stays NaN. A shift of −inf (nothing seen yet) gives all zeros.
inline void exp_shifted(float* x, float shift, int count) {
  if (shift == -INFINITY) {
    std::fill_n(x, count, 0.0f);
    return;
  }
  const __m256 s = _mm256_set1_ps(shift);
  const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.3f);
  for (int j = 0; j < count; j += 8) {
    const __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + j), s);
    const __m256 underflow = _mm256_cmp_ps(v, lo, _CMP_LT_OQ);
    __m256 a = _mm256_max_ps(lo, _mm256_min_ps(hi, v));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    a = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), a);
    a = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), a);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, a, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, a, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, a, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, a, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, a, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(a, a), _mm256_add_ps(a, _mm256_set1_ps(1.0f)));
    const __m256i exponent =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
    _mm256_storeu_ps(x + j, _mm256_andnot_ps(underflow, result));
  }
}

}  // namespace turbodecode::attention::simd
