// A fixed number of SIMD vectors kept in registers, for kernels that hold several accumulators
// (one per row, head or chunk). SVE vectors are sizeless: they cannot be array elements or
// class members, so such a kernel names its vectors as a parameter pack of local variables
// instead: with_vectors makes the pack, unroll walks it at compile time, pick takes one element.
// Per-target code (included once per Highway target, like every -inl.h here).
#ifndef TURBODECODE_COMMON_SIMD_VECTOR_PACK_MACROS_
#define TURBODECODE_COMMON_SIMD_VECTOR_PACK_MACROS_
// For the lambdas given to unroll and with_vectors: they hold vectors by reference, which
// stay in registers only when the lambda is inlined.
#define TD_INLINE_LAMBDA __attribute__((always_inline))
#endif

#if defined(TURBODECODE_COMMON_SIMD_VECTOR_PACK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TURBODECODE_COMMON_SIMD_VECTOR_PACK_INL_H_
#undef TURBODECODE_COMMON_SIMD_VECTOR_PACK_INL_H_
#else
#define TURBODECODE_COMMON_SIMD_VECTOR_PACK_INL_H_
#endif

#include <type_traits>
#include <utility>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::simd::HWY_NAMESPACE {

// A compile-time index, passed to the bodies below as a value.
template <int I>
using Index = std::integral_constant<int, I>;

template <class Body, int... I>
HWY_INLINE void unroll_indices(const Body& body, std::integer_sequence<int, I...>) {
  (body(Index<I>()), ...);
}

// body(Index<0>()), ..., body(Index<Count − 1>()), in that order.
template <int Count, class Body>
HWY_INLINE void unroll(const Body& body) {
  unroll_indices(body, std::make_integer_sequence<int, Count>());
}

// The I-th of the vectors.
template <int I, class V, class... Rest>
HWY_INLINE V& pick(V& first, Rest&... rest) {
  if constexpr (I == 0) {
    return first;
  } else {
    return pick<I - 1>(rest...);
  }
}

// body(v_0, ..., v_{Count − 1}) on Count local vectors, v_i = make(Index<i>()).
template <int Count, class Make, class Body, class... V>
HWY_INLINE void with_vectors(const Make& make, const Body& body, V&... made) {
  if constexpr (sizeof...(V) == Count) {
    body(made...);
  } else {
    auto next = make(Index<static_cast<int>(sizeof...(V))>());
    with_vectors<Count>(make, body, made..., next);
  }
}

}  // namespace turbodecode::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
