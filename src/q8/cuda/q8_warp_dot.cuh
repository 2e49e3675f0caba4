// One warp's dot product of a Q8_0 row with an f32 vector. The matvec kernel and the HC expand
// fusions share it, so fused and unfused results are bitwise equal.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "turbodecode/q8.h"

namespace turbodecode::cuda {

inline constexpr int kWarpSize = 32;

// Sums over the warp with a butterfly: every lane ends with the same, order-fixed total.
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Eight lanes share a block (4 weights each), four blocks per warp step. Each lane accumulates
// d·(its 4-term dot) over its blocks in increasing order; the warp sum then adds the lanes in a
// fixed order. Loads of kStepsInFlight steps are issued before any is used, so about 1 KB of
// weights per warp is in flight. `row` must be 2-byte aligned; every lane returns the full dot
// product.
__device__ __forceinline__ float q8_warp_row_dot(const std::uint8_t* row, const float* x,
                                                 std::int64_t cols) {
  constexpr int kStepsInFlight = 8;
  constexpr int kBlocksPerStep = 4;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int part = lane % 8;
  const int group = lane / 8;
  const std::int64_t blocks = cols / kQ8BlockValues;
  float acc = 0.0f;
  for (std::int64_t first = group; first < blocks; first += kBlocksPerStep * kStepsInFlight) {
    std::uint16_t scale[kStepsInFlight], q01[kStepsInFlight], q23[kStepsInFlight];
    float xs[kStepsInFlight][4];
#pragma unroll
    for (int s = 0; s < kStepsInFlight; ++s) {
      const std::int64_t b = first + s * kBlocksPerStep;
      if (b < blocks) {
        const auto* halves = reinterpret_cast<const std::uint16_t*>(row + b * kQ8BlockBytes);
        scale[s] = __ldg(halves);
        q01[s] = __ldg(halves + 1 + 2 * part);
        q23[s] = __ldg(halves + 2 + 2 * part);
        const float* xb = x + b * kQ8BlockValues + 4 * part;
#pragma unroll
        for (int k = 0; k < 4; ++k) xs[s][k] = __ldg(xb + k);
      }
    }
#pragma unroll
    for (int s = 0; s < kStepsInFlight; ++s) {
      if (first + s * kBlocksPerStep < blocks) {
        float dot = static_cast<float>(static_cast<std::int8_t>(q01[s] & 0xff)) * xs[s][0];
        dot = fmaf(static_cast<float>(static_cast<std::int8_t>(q01[s] >> 8)), xs[s][1], dot);
        dot = fmaf(static_cast<float>(static_cast<std::int8_t>(q23[s] & 0xff)), xs[s][2], dot);
        dot = fmaf(static_cast<float>(static_cast<std::int8_t>(q23[s] >> 8)), xs[s][3], dot);
        acc = fmaf(__half2float(__ushort_as_half(scale[s])), dot, acc);
      }
    }
  }
  return warp_sum(acc);
}

}  // namespace turbodecode::cuda
