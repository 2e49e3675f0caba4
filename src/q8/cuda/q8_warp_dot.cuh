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
// d·(its 4-term dot) over its blocks; the warp sum then adds the lanes in a fixed order.
// `row` must be 2-byte aligned; every lane returns the full dot product.
__device__ __forceinline__ float q8_warp_row_dot(const std::uint8_t* row, const float* x,
                                                 std::int64_t cols) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int part = lane % 8;
  const int group = lane / 8;
  const std::int64_t blocks = cols / kQ8BlockValues;
  float acc = 0.0f;
#pragma unroll 4
  for (std::int64_t b = group; b < blocks; b += 4) {
    const std::uint8_t* block = row + b * kQ8BlockBytes;
    const auto* halves = reinterpret_cast<const std::uint16_t*>(block);
    const float d = __half2float(__ushort_as_half(__ldg(halves)));
    const std::uint16_t q01 = __ldg(halves + 1 + 2 * part);
    const std::uint16_t q23 = __ldg(halves + 2 + 2 * part);
    const float* xb = x + b * kQ8BlockValues + 4 * part;
    float s = static_cast<float>(static_cast<std::int8_t>(q01 & 0xff)) * __ldg(xb);
    s = fmaf(static_cast<float>(static_cast<std::int8_t>(q01 >> 8)), __ldg(xb + 1), s);
    s = fmaf(static_cast<float>(static_cast<std::int8_t>(q23 & 0xff)), __ldg(xb + 2), s);
    s = fmaf(static_cast<float>(static_cast<std::int8_t>(q23 >> 8)), __ldg(xb + 3), s);
    acc = fmaf(d, s, acc);
  }
  return warp_sum(acc);
}

}  // namespace turbodecode::cuda
