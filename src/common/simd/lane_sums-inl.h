// The lane sums of several vectors at once, side by side, each in one fixed order.
// Per-target code (included once per Highway target).
#if defined(TURBODECODE_COMMON_SIMD_LANE_SUMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TURBODECODE_COMMON_SIMD_LANE_SUMS_INL_H_
#undef TURBODECODE_COMMON_SIMD_LANE_SUMS_INL_H_
#else
#define TURBODECODE_COMMON_SIMD_LANE_SUMS_INL_H_
#endif

#include <algorithm>
#include <bit>
#include <cstddef>

#include "common/simd/vector_pack-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_SCALAR

// One lane per vector: the lanes are the sums.
template <class D, class... V>
HWY_INLINE void store_lane_sums(D d, float* HWY_RESTRICT sums, const V&... v) {
  unroll<static_cast<int>(sizeof...(V))>(
      [&](auto i) TD_INLINE_LAMBDA { sums[i] = hn::GetLane(pick<i>(v...)); });
}

#else

// Stores, from `out` on, the partial sums the vectors v hold, `group` lanes per input vector.
// While a group has more than one lane, pairs of vectors fold into one: the even and odd
// lanes of the pair added side by side (ConcatEven + ConcatOdd), which puts the first vector's
// partial sums in the lower half and the second's in the upper half, each input's lanes
// summed pairwise in a tree that does not depend on its neighbours.
template <class D, class... V>
HWY_INLINE void fold_lane_sums(D d, std::size_t group, float* HWY_RESTRICT out, const V&... v) {
  constexpr int kCount = static_cast<int>(sizeof...(V));
  if constexpr (kCount == 1) {
    auto sums = pick<0>(v...);
    for (; group > 1; group /= 2) {
      sums = hn::Add(hn::ConcatEven(d, sums, sums), hn::ConcatOdd(d, sums, sums));
    }
    hn::StoreU(sums, d, out);
  } else if (group == 1) {
    unroll<kCount>([&](auto i)
                       TD_INLINE_LAMBDA { hn::StoreU(pick<i>(v...), d, out + i * hn::Lanes(d)); });
  } else {
    with_vectors<kCount / 2>(
        [&](auto i) TD_INLINE_LAMBDA {
          const auto& low = pick<2 * i>(v...);
          const auto& high = pick<2 * i + 1>(v...);
          return hn::Add(hn::ConcatEven(d, high, low), hn::ConcatOdd(d, high, low));
        },
        [&](const auto&... folded)
            TD_INLINE_LAMBDA { fold_lane_sums(d, group / 2, out, folded...); });
  }
}

// sums[i] = the sum of the lanes of v_i, for every vector given. Each sum adds its vector's
// lanes pairwise in one fixed tree, whatever the other vectors and however many there are.
template <class D, class... V>
HWY_INLINE void store_lane_sums(D d, float* HWY_RESTRICT sums, const V&... v) {
  constexpr int kCount = static_cast<int>(sizeof...(V));
  constexpr int kPadded = static_cast<int>(std::bit_ceil(static_cast<unsigned>(kCount)));
  HWY_ALIGN float lanes[hn::MaxLanes(d) * kPadded];
  // Zero vectors pad the count to a power of two, so that pairs always fold.
  with_vectors<kPadded - kCount>([&](auto) TD_INLINE_LAMBDA { return hn::Zero(d); },
                                 [&](const auto&... zeros) TD_INLINE_LAMBDA {
                                   fold_lane_sums(d, hn::Lanes(d), lanes, v..., zeros...);
                                 });
  std::copy_n(lanes, kCount, sums);
}

#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace turbodecode::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
