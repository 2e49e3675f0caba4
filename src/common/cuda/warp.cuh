// Warp-level building blocks: the warp size, the full-warp shuffle mask and the butterfly
// reduction over the lanes of a warp.
#pragma once

namespace turbodecode::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

// Reduces `value` over each aligned group of kWidth lanes (a power of two, at most 32) with a
// butterfly: xor offsets kWidth / 2, kWidth / 4, …, 1, each step value = op(value, partner's).
// Every lane of a group ends with the same result, combined in an order fixed by the lane
// index alone, so it is the same on every run. Every lane of the warp must call it.
template <int kWidth, class Op>
__device__ __forceinline__ float butterfly_reduce(float value, Op op) {
  static_assert(kWidth >= 1 && kWidth <= kWarpSize && (kWidth & (kWidth - 1)) == 0,
                "a power-of-two group of lanes within a warp");
#pragma unroll
  for (int offset = kWidth / 2; offset >= 1; offset /= 2) {
    value = op(value, __shfl_xor_sync(kFullWarpMask, value, offset));
  }
  return value;
}

template <int kWidth>
__device__ __forceinline__ float butterfly_sum(float value) {
  return butterfly_reduce<kWidth>(value, [](float own, float other) { return own + other; });
}

// The sum over the warp: every lane ends with the same, order-fixed total.
__device__ __forceinline__ float warp_sum(float value) {
  return butterfly_sum<kWarpSize>(value);
}

// The maximum over the warp (fmaxf: a NaN lane loses to any number), in every lane.
__device__ __forceinline__ float warp_max(float value) {
  return butterfly_reduce<kWarpSize>(value,
                                     [](float own, float other) { return fmaxf(own, other); });
}

}  // namespace turbodecode::cuda
