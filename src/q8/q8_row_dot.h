// The CPU backend's dot product of one Q8_0 row with an f32 vector. The Q8 matvec and the HC
// expand fusions both call it, so fused and unfused results are bitwise equal.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/f16.h"
#include "turbodecode/q8.h"

namespace turbodecode::q8 {

// Σ_b d_b · (Σ_j q_bj·x_bj): each block's sum is formed in 8 fixed lanes (vectorisable), the
// lanes added pairwise, then scaled by d into the row's accumulator.
inline float row_dot_cpu(const std::uint8_t* row, const float* x, std::int64_t cols) {
  constexpr int kLanes = 8;
  float acc = 0.0f;
  for (std::int64_t b = 0; b < cols / kQ8BlockValues; ++b) {
    const std::uint8_t* block = row + b * kQ8BlockBytes;
    std::uint16_t d_bits;
    std::memcpy(&d_bits, block, sizeof d_bits);
    const auto* q = reinterpret_cast<const std::int8_t*>(block + 2);
    const float* xb = x + b * kQ8BlockValues;
    // Widening into a local array first lets the compiler vectorise both loops.
    float qf[kQ8BlockValues];
    for (int j = 0; j < kQ8BlockValues; ++j) qf[j] = static_cast<float>(q[j]);
    float lanes[kLanes] = {};
    for (int j = 0; j < kQ8BlockValues; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) lanes[l] = __builtin_fmaf(qf[j + l], xb[j + l], lanes[l]);
    }
    for (int width = kLanes / 2; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    }
    acc = __builtin_fmaf(f16_to_f32(d_bits), lanes[0], acc);
  }
  return acc;
}

}  // namespace turbodecode::q8
