// Weighted sums of stored rows into f32 output rows: the V side of decode attention, and the
// scaling and merging of partial outputs. Every element is one chain of fused multiply-adds
// in position order, so results never depend on which thread runs them. Per-target code.
#if defined(TURBODECODE_ATTENTION_ROW_ACCUMULATE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TURBODECODE_ATTENTION_ROW_ACCUMULATE_INL_H_
#undef TURBODECODE_ATTENTION_ROW_ACCUMULATE_INL_H_
#else
#define TURBODECODE_ATTENTION_ROW_ACCUMULATE_INL_H_
#endif

#include <algorithm>

#include "attention/row_readers-inl.h"
#include "common/simd/vector_pack-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::attention::HWY_NAMESPACE::simd {
namespace hn = hwy::HWY_NAMESPACE;
using turbodecode::simd::HWY_NAMESPACE::pick;
using turbodecode::simd::HWY_NAMESPACE::unroll;
using turbodecode::simd::HWY_NAMESPACE::with_vectors;

// o_h[j] += Σ_{t in [begin[h], end[h])} coefs[h·coef_stride + t] · value(t, j) for Heads rows
// o_h and j in [0, count), positions t in order, one fused multiply-add each: the same
// rounding as one axpy per position, with each o_h chunk kept in registers across the whole
// tile. value(t, j) gives elements [j, j + Lanes(d)) of position t's row (a reader's load, or
// a decoded tile), asked for once per t of the union of the heads' ranges. A position outside
// a head's range is skipped, not weighted by 0, so a head never meets another head's
// positions (not even a NaN there). Heads · Chunks accumulators hide the FMA latency; count
// is a multiple of Chunks · Lanes(d).
template <int Heads, int Chunks, class D, class Values>
HWY_INLINE void accumulate_tile(D d, const Values& value, const int* begin, const int* end,
                                const float* coefs, int coef_stride, float* const* o, int count) {
  const int lanes = static_cast<int>(hn::Lanes(d));
  int first = begin[0], last = end[0], shared_first = begin[0], shared_last = end[0];
  for (int h = 1; h < Heads; ++h) {
    first = std::min(first, begin[h]);
    last = std::max(last, end[h]);
    shared_first = std::max(shared_first, begin[h]);
    shared_last = std::min(shared_last, end[h]);
  }
  // Accumulator (h, c) is element h · Chunks + c of the pack.
  const auto chunk = [&](auto i, int j) TD_INLINE_LAMBDA {
    return o[decltype(i)::value / Chunks] + j + decltype(i)::value % Chunks * lanes;
  };
  for (int j = 0; j < count; j += Chunks * lanes) {
    with_vectors<Heads * Chunks>(
        [&](auto i) TD_INLINE_LAMBDA { return hn::LoadU(d, chunk(i, j)); },
        [&](auto&... acc) TD_INLINE_LAMBDA {
          for (int t = first; t < last; ++t) {
            const bool every_head = t >= shared_first && t < shared_last;
            with_row_chunks<Chunks>(
                d, value, t, j, [&](const auto&... v) TD_INLINE_LAMBDA {
                  unroll<Heads>([&](auto head) TD_INLINE_LAMBDA {
                    constexpr int kHead = decltype(head)::value;
                    if (!every_head && (t < begin[kHead] || t >= end[kHead])) return;
                    const auto w = hn::Set(d, coefs[kHead * coef_stride + t]);
                    unroll<Chunks>([&](auto c) TD_INLINE_LAMBDA {
                      constexpr int kChunk = decltype(c)::value;
                      auto& sum = pick<kHead * Chunks + kChunk>(acc...);
                      sum = hn::MulAdd(w, pick<kChunk>(v...), sum);
                    });
                  });
                });
          }
          unroll<Heads * Chunks>(
              [&](auto i) TD_INLINE_LAMBDA { hn::StoreU(pick<i>(acc...), d, chunk(i, j)); });
        });
  }
}

// y += w·x, count a multiple of Lanes(d).
template <class D>
HWY_INLINE void axpy(D d, float w, const float* x, float* y, int count) {
  const auto weight = hn::Set(d, w);
  for (int j = 0; j < count; j += static_cast<int>(hn::Lanes(d))) {
    hn::StoreU(hn::MulAdd(weight, hn::LoadU(d, x + j), hn::LoadU(d, y + j)), d, y + j);
  }
}

// y *= c, count a multiple of Lanes(d).
template <class D>
HWY_INLINE void scale(D d, float c, float* y, int count) {
  const auto factor = hn::Set(d, c);
  for (int j = 0; j < count; j += static_cast<int>(hn::Lanes(d))) {
    hn::StoreU(hn::Mul(factor, hn::LoadU(d, y + j)), d, y + j);
  }
}

}  // namespace turbodecode::attention::HWY_NAMESPACE::simd
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
