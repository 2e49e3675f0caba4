// The CPU backend's dot products of one Q8_0 row with a few f32 vectors (token rows). The Q8
// matvec and the HC expand fusions (which call it) use it, so fused and unfused results are
// bitwise equal, and a token's result does not depend on how many tokens share the call.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/f16.h"
#include "turbodecode/q8.h"

namespace turbodecode::q8 {

// Token rows that share one pass over a weight row.
inline constexpr int kCpuTileTokens = 8;

// dots[i] = Σ_b d_b · (Σ_j q_bj·x_i,bj) for the kTokens rows x + i·x_stride, with AVX2: a
// block's 32 weights are widened once for all rows; per row, its 32 products go into 8 lanes
// (weight j in lane j % 8), the block's lanes are scaled by d into the row's 8 lanes, and those
// are added pairwise at the end. (Reducing every block to one value before scaling costs a
// horizontal sum per 32 weights: docs/hc.md, "Tried, not kept".)
template <int kTokens>
inline void row_dots_cpu(const std::uint8_t* row, const float* x, std::int64_t x_stride,
                         std::int64_t cols, float (&dots)[kTokens]) {
  constexpr int kLanes = 8;
  constexpr int kPieces = kQ8BlockValues / kLanes;
  __m256 acc[kTokens];
  for (int i = 0; i < kTokens; ++i) acc[i] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < cols / kQ8BlockValues; ++b) {
    const std::uint8_t* block = row + b * kQ8BlockBytes;
    std::uint16_t d_bits;
    std::memcpy(&d_bits, block, sizeof d_bits);
    const __m256 d = _mm256_set1_ps(f16_to_f32(d_bits));
    __m256 q[kPieces];
    for (int p = 0; p < kPieces; ++p) {
      std::int64_t packed;
      std::memcpy(&packed, block + 2 + kLanes * p, sizeof packed);
      q[p] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(packed)));
    }
    for (int i = 0; i < kTokens; ++i) {
      const float* xb = x + i * x_stride + b * kQ8BlockValues;
      __m256 sum = _mm256_setzero_ps();
      for (int p = 0; p < kPieces; ++p) {
        sum = _mm256_fmadd_ps(q[p], _mm256_loadu_ps(xb + kLanes * p), sum);
      }
      acc[i] = _mm256_fmadd_ps(d, sum, acc[i]);
    }
  }
  for (int i = 0; i < kTokens; ++i) {
    float lanes[kLanes];
    _mm256_storeu_ps(lanes, acc[i]);
    for (int width = kLanes / 2; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    }
    dots[i] = lanes[0];
  }
}

}  // namespace turbodecode::q8
