// The CPU backend's dot products of one Q8_0 row with a few f32 vectors (token rows). The Q8
// matvec and the HC expand fusions (which call it) use it, so fused and unfused results are
// bitwise equal, and a token's result does not depend on how many tokens share the call.
// Per-target code.
#if defined(TURBODECODE_Q8_Q8_ROW_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TURBODECODE_Q8_Q8_ROW_DOT_INL_H_
#undef TURBODECODE_Q8_Q8_ROW_DOT_INL_H_
#else
#define TURBODECODE_Q8_Q8_ROW_DOT_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "common/simd/lane_sums-inl.h"
#include "common/simd/vector_pack-inl.h"
#include "hwy/highway.h"
#include "turbodecode/q8.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::q8::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using turbodecode::simd::HWY_NAMESPACE::pick;
using turbodecode::simd::HWY_NAMESPACE::store_lane_sums;
using turbodecode::simd::HWY_NAMESPACE::unroll;
using turbodecode::simd::HWY_NAMESPACE::with_vectors;

// Token rows that share one pass over a weight row.
inline constexpr int kCpuTileTokens = 8;

// The vectors of the matvec: a block of 32 weights is a whole number of them.
using Q8Tag = hn::CappedTag<float, 16>;

// row_dots with a block's 32 weights in kPieces vectors of Lanes(d) = 32 / kPieces lanes.
template <int kTokens, int kPieces, class D>
HWY_INLINE void row_dots_in_pieces(D d, const std::uint8_t* row, const float* x,
                                   std::int64_t x_stride, std::int64_t cols, float* dots) {
  const int lanes = static_cast<int>(hn::Lanes(d));
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::int8_t, D> d8;
  const hn::Rebind<hwy::float16_t, D> dh;
  const hn::RebindToUnsigned<decltype(dh)> du16;
  with_vectors<kTokens>(
      [&](auto) TD_INLINE_LAMBDA { return hn::Zero(d); },
      [&](auto&... acc) TD_INLINE_LAMBDA {
        for (std::int64_t b = 0; b < cols / kQ8BlockValues; ++b) {
          const std::uint8_t* block = row + b * kQ8BlockBytes;
          std::uint16_t d_bits;
          std::memcpy(&d_bits, block, sizeof d_bits);
          const auto scale = hn::PromoteTo(d, hn::BitCast(dh, hn::Set(du16, d_bits)));
          const auto* weights = reinterpret_cast<const std::int8_t*>(block + 2);
          with_vectors<kPieces>(
              [&](auto p) TD_INLINE_LAMBDA {
                return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, weights + p * lanes)));
              },
              [&](const auto&... q) TD_INLINE_LAMBDA {
                unroll<kTokens>([&](auto i) TD_INLINE_LAMBDA {
                  const float* xb = x + i * x_stride + b * kQ8BlockValues;
                  auto sum = hn::Zero(d);
                  unroll<kPieces>([&](auto p) TD_INLINE_LAMBDA {
                    sum = hn::MulAdd(pick<p>(q...), hn::LoadU(d, xb + p * lanes), sum);
                  });
                  auto& token = pick<i>(acc...);
                  token = hn::MulAdd(scale, sum, token);
                });
              });
        }
        store_lane_sums(d, dots, acc...);
      });
}

// dots[i] = Σ_b d_b · (Σ_j q_bj·x_i,bj) for the kTokens rows x + i·x_stride: a block's 32
// weights are widened once for all rows; per row, its 32 products go into the lanes of one
// vector, the block's lanes are scaled by d into the row's accumulator, and the accumulator's
// lanes are added pairwise at the end (a horizontal sum per block would cost more than the
// block's multiply-adds).
template <int kTokens>
HWY_INLINE void row_dots_cpu(const std::uint8_t* row, const float* x, std::int64_t x_stride,
                             std::int64_t cols, float* dots) {
  const Q8Tag d;
  if constexpr (!HWY_HAVE_SCALABLE) {
    row_dots_in_pieces<kTokens, kQ8BlockValues / hn::MaxLanes(d)>(d, row, x, x_stride, cols, dots);
  } else if (hn::Lanes(d) == 4) {
    row_dots_in_pieces<kTokens, 8>(d, row, x, x_stride, cols, dots);
  } else if (hn::Lanes(d) == 8) {
    row_dots_in_pieces<kTokens, 4>(d, row, x, x_stride, cols, dots);
  } else {
    row_dots_in_pieces<kTokens, 2>(d, row, x, x_stride, cols, dots);
  }
}

}  // namespace turbodecode::q8::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
