// Dot products of f32 query rows with stored cache rows (any reader of row_readers-inl.h): the
// scores of decode attention. Each sum runs in one fixed order, so results never depend on
// which thread runs them or on how many rows share a call. Per-target code.
#if defined(TURBODECODE_ATTENTION_ROW_DOTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TURBODECODE_ATTENTION_ROW_DOTS_INL_H_
#undef TURBODECODE_ATTENTION_ROW_DOTS_INL_H_
#else
#define TURBODECODE_ATTENTION_ROW_DOTS_INL_H_
#endif

#include <cstdint>

#include "attention/row_readers-inl.h"
#include "common/simd/lane_sums-inl.h"
#include "common/simd/vector_pack-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::attention::HWY_NAMESPACE::simd {
namespace hn = hwy::HWY_NAMESPACE;
using turbodecode::simd::HWY_NAMESPACE::pick;
using turbodecode::simd::HWY_NAMESPACE::store_lane_sums;
using turbodecode::simd::HWY_NAMESPACE::unroll;
using turbodecode::simd::HWY_NAMESPACE::with_vectors;

// The sum of the kChains accumulator chains of one (row, head), added pairwise:
// (c0 + c2) + (c1 + c3) for four.
template <int kChains, int kFirst, int kStride, class... V>
HWY_INLINE auto sum_chains(const V&... acc) {
  if constexpr (kChains == 1) {
    return pick<kFirst>(acc...);
  } else if constexpr (kChains == 2) {
    return hn::Add(pick<kFirst>(acc...), pick<kFirst + kStride>(acc...));
  } else {
    static_assert(kChains == 4);
    return hn::Add(hn::Add(pick<kFirst>(acc...), pick<kFirst + 2 * kStride>(acc...)),
                   hn::Add(pick<kFirst + kStride>(acc...), pick<kFirst + 3 * kStride>(acc...)));
  }
}

// Accumulator chains of every (row, head) sum of dot_rows.
inline constexpr int kDotChains = 2;

// dots[r·Heads + h] = Σ_{j in [begin, begin + count)} q[h][j] · row_r[j] for Heads query rows
// against Rows stored rows: each row chunk is read once for all heads, two at a time where the
// reader reads them so (with_row_chunks). Every (row, head) sum runs over the same kDotChains
// accumulator chains, added in the same order, whatever Heads and Rows are: a score never
// depends on which other heads or rows share its block (a query row scores alike alone and in
// a run, SPEC §2.8). count is a multiple of kDotChains · Lanes(d) (64 suits every target).
template <int Heads, int Rows, class D, class Reader>
HWY_INLINE void dot_rows(D d, const Reader& reader, const std::uint8_t* const* rows,
                         const float* const* q, int begin, int count, float* dots) {
  constexpr int kChains = kDotChains;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const RowsOfReader<D, Reader> row_values{reader, rows, 0};
  // Accumulator (r, c, h) is element (r · kChains + c) · Heads + h of the pack.
  with_vectors<Rows * kChains * Heads>(
      [&](auto) TD_INLINE_LAMBDA { return hn::Zero(d); },
      [&](auto&... acc) TD_INLINE_LAMBDA {
        for (int j = begin; j < begin + count; j += kChains * lanes) {
          unroll<Rows>([&](auto r) TD_INLINE_LAMBDA {
            constexpr int kRow = decltype(r)::value;
            with_row_chunks<kChains>(
                d, row_values, kRow, j, [&](const auto&... chunk) TD_INLINE_LAMBDA {
                  unroll<kChains>([&](auto chain) TD_INLINE_LAMBDA {
                    constexpr int kChain = decltype(chain)::value;
                    unroll<Heads>([&](auto head) TD_INLINE_LAMBDA {
                      constexpr int kHead = decltype(head)::value;
                      const auto query = hn::LoadU(d, q[kHead] + j + kChain * lanes);
                      auto& sum = pick<(kRow * kChains + kChain) * Heads + kHead>(acc...);
                      sum = hn::MulAdd(query, pick<kChain>(chunk...), sum);
                    });
                  });
                });
          });
        }
        with_vectors<Rows * Heads>(
            [&](auto i) TD_INLINE_LAMBDA {
              constexpr int kRow = decltype(i)::value / Heads;
              constexpr int kHead = decltype(i)::value % Heads;
              return sum_chains<kChains, kRow * kChains * Heads + kHead, Heads>(acc...);
            },
            [&](const auto&... sums) TD_INLINE_LAMBDA { store_lane_sums(d, dots, sums...); });
      });
}

}  // namespace turbodecode::attention::HWY_NAMESPACE::simd
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
