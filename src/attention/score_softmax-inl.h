// The vector steps of the online softmax over a tile of scores: the tile's maximum and the
// weights exp(s − m). Per-target code.
#if defined(TURBODECODE_ATTENTION_SCORE_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TURBODECODE_ATTENTION_SCORE_SOFTMAX_INL_H_
#undef TURBODECODE_ATTENTION_SCORE_SOFTMAX_INL_H_
#else
#define TURBODECODE_ATTENTION_SCORE_SOFTMAX_INL_H_
#endif

#include <algorithm>
#include <cmath>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::attention::HWY_NAMESPACE::simd {
namespace hn = hwy::HWY_NAMESPACE;

// max_t x_t, or NaN when any x_t is NaN (a NaN score must reach the output, SPEC §7); count a
// multiple of Lanes(d).
template <class D>
HWY_INLINE float max(D d, const float* x, int count) {
  auto m = hn::Set(d, -INFINITY);
  auto nan = hn::Zero(d);  // all bits set in a lane where some x_t was NaN
  for (int j = 0; j < count; j += static_cast<int>(hn::Lanes(d))) {
    const auto v = hn::LoadU(d, x + j);
    m = hn::Max(m, v);
    nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(v)));
  }
  if (!hn::AllFalse(d, hn::MaskFromVec(nan))) return NAN;
  // Highway's emulated targets start MaxOfLanes from the lowest finite float, which would turn
  // an all −inf tile into −FLT_MAX.
  if (hn::AllTrue(d, hn::Eq(m, hn::Set(d, -INFINITY)))) return -INFINITY;
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// x_t ← exp(x_t − shift), count a multiple of Lanes(d). Cephes-style: 2^n · p(r) with
// r = x − n·ln2 split in two constants, a degree-6 polynomial (≈ 1 ulp). Results below e^-87
// (including x = −inf) are 0; NaN stays NaN. A shift of −inf (nothing seen yet) gives all
// zeros.
template <class D>
HWY_INLINE void exp_shifted(D d, float* x, float shift, int count) {
  if (shift == -INFINITY) {
    std::fill_n(x, count, 0.0f);
    return;
  }
  const hn::RebindToSigned<D> di;
  const auto s = hn::Set(d, shift);
  const auto lo = hn::Set(d, -87.3f), hi = hn::Set(d, 88.3f);
  for (int j = 0; j < count; j += static_cast<int>(hn::Lanes(d))) {
    const auto v = hn::Sub(hn::LoadU(d, x + j), s);
    const auto underflow = hn::Lt(v, lo);
    auto a = hn::Max(lo, hn::Min(hi, v));
    const auto n = hn::Round(hn::Mul(a, hn::Set(d, 1.44269504088896341f)));
    a = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), a);
    a = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), a);
    auto p = hn::Set(d, 1.9875691500e-4f);
    p = hn::MulAdd(p, a, hn::Set(d, 1.3981999507e-3f));
    p = hn::MulAdd(p, a, hn::Set(d, 8.3334519073e-3f));
    p = hn::MulAdd(p, a, hn::Set(d, 4.1665795894e-2f));
    p = hn::MulAdd(p, a, hn::Set(d, 1.6666665459e-1f));
    p = hn::MulAdd(p, a, hn::Set(d, 5.0000001201e-1f));
    p = hn::MulAdd(p, hn::Mul(a, a), hn::Add(a, hn::Set(d, 1.0f)));
    const auto exponent = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
    const auto result = hn::Mul(p, hn::BitCast(d, exponent));
    // Min and Max need not keep a NaN on every target: put it back.
    const auto kept = hn::IfThenElse(hn::IsNaN(v), v, result);
    hn::StoreU(hn::IfThenZeroElse(underflow, kept), d, x + j);
  }
}

}  // namespace turbodecode::attention::HWY_NAMESPACE::simd
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
