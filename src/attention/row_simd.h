// AVX2/F16C row primitives of the CPU decode kernel: widening F16 rows, codebook lookups of
// TQ codes, dot products and scaled accumulation. Row lengths are multiples of 32. Each
// function sums in one fixed order, so results never depend on which thread runs them.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace turbodecode::attention::simd {

inline void widen_f16_row(const std::uint16_t* source, float* destination, int count) {
  for (int j = 0; j < count; j += 8) {
    const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source + j));
    _mm256_storeu_ps(destination + j, _mm256_cvtph_ps(half));
  }
}

// Eight codes starting at element j as i32 lanes. 4-bit rows pack two codes per byte (even
// element in the low nibble); wider codes take a byte each, masked to their bit width so a
// corrupt high bit can never index past the codebook.
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
  } else {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + j));
    const __m256i codes = _mm256_cvtepu8_epi32(bytes);
    if constexpr (Bits == 8) return codes;
    return _mm256_and_si256(codes, _mm256_set1_epi32((1 << Bits) - 1));
  }
}

// destination[j] = codebook[code_j]: the codebook values of a TQ row, before its norm scale.
// Scalar table loads: on the machines measured they beat AVX2 gathers by ~3x.
template <int Bits>
inline void lookup_codes(const std::uint8_t* row, const float* codebook, float* destination,
                         int count) {
  if constexpr (Bits == 4) {
    for (int j = 0; j < count; j += 2) {
      destination[j] = codebook[row[j / 2] & 0x0f];
      destination[j + 1] = codebook[row[j / 2] >> 4];
    }
  } else {
    for (int j = 0; j < count; ++j) destination[j] = codebook[row[j] & ((1 << Bits) - 1)];
  }
}

inline float horizontal_sum(__m256 v) {
  const __m128 pair = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 quad = _mm_add_ps(pair, _mm_movehl_ps(pair, pair));
  return _mm_cvtss_f32(_mm_add_ss(quad, _mm_movehdup_ps(quad)));
}

// Σ a_j·b_j with four independent accumulators (hides the FMA latency).
inline float dot(const float* a, const float* b, int count) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  for (int j = 0; j < count; j += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 16), _mm256_loadu_ps(b + j + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 24), _mm256_loadu_ps(b + j + 24), acc3);
  }
  return horizontal_sum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

// y += w·x.
inline void axpy(float w, const float* x, float* y, int count) {
  const __m256 weight = _mm256_set1_ps(w);
  for (int j = 0; j < count; j += 8) {
    _mm256_storeu_ps(y + j,
                     _mm256_fmadd_ps(weight, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
  }
}

// y *= c.
inline void scale(float c, float* y, int count) {
  const __m256 factor = _mm256_set1_ps(c);
  for (int j = 0; j < count; j += 8) {
    _mm256_storeu_ps(y + j, _mm256_mul_ps(factor, _mm256_loadu_ps(y + j)));
  }
}

}  // namespace turbodecode::attention::simd
