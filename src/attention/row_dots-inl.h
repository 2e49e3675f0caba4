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

// Vectors of a row each step of dot_rows reads: two, so that readers that read two at once
// (row_readers-inl.h) can.
inline constexpr int kDotStep = 2;

// The sums dot_rows keeps in flight: Heads · Rows of them, enough to hide the FMA latency, and
// a whole vector of lane sums folded at once.
inline constexpr int kDotSums = 16;

// Rows a score block of Heads heads reads at once: kDotSums / Heads (fewer heads, more rows),
// at most 8, since decoded rows are the bulk of a block's code and every reader × block shape
// × SIMD target is one instantiation.
template <int Heads>
inline constexpr int kDotBlockRows = kDotSums / Heads < 8 ? kDotSums / Heads : 8;

// dots[r·Heads + h] = Σ_{j in [begin, begin + count)} q[h][j] · row_r[j] for Heads query rows
// against Rows stored rows: each row chunk is read once for all heads, kDotStep at a time
// (with_row_chunks). Every (row, head) sum is one chain of fused multiply-adds in element
// order, its lanes then added in one fixed tree (store_lane_sums), whatever Heads and Rows
// are: a score never depends on which other heads or rows share its block (a query row
// scores alike alone and in a run, SPEC §2.8). count is a multiple of kDotStep · Lanes(d)
// (64 suits every target).
template <int Heads, int Rows, class D, class Reader>
HWY_INLINE void dot_rows(D d, const Reader& reader, const std::uint8_t* const* rows,
                         const float* const* q, int begin, int count, float* dots) {
  const int lanes = static_cast<int>(hn::Lanes(d));
  const RowsOfReader<D, Reader> row_values{reader, rows, 0};
  // Accumulator (r, h) is element r · Heads + h of the pack.
  with_vectors<Rows * Heads>(
      [&](auto) TD_INLINE_LAMBDA { return hn::Zero(d); },
      [&](auto&... acc) TD_INLINE_LAMBDA {
        for (int j = begin; j < begin + count; j += kDotStep * lanes) {
          unroll<Rows>([&](auto r) TD_INLINE_LAMBDA {
            with_row_chunks<kDotStep>(
                d, row_values, decltype(r)::value, j, [&](const auto&... chunk) TD_INLINE_LAMBDA {
                  unroll<kDotStep>([&](auto step) TD_INLINE_LAMBDA {
                    unroll<Heads>([&](auto head) TD_INLINE_LAMBDA {
                      // Named here, not in the enclosing lambdas: clang rejects a constexpr
                      // local of an enclosing generic lambda in a template argument.
                      constexpr int kRow = decltype(r)::value;
                      constexpr int kChunk = decltype(step)::value;
                      constexpr int kHead = decltype(head)::value;
                      const auto query = hn::LoadU(d, q[kHead] + j + kChunk * lanes);
                      auto& sum = pick<kRow * Heads + kHead>(acc...);
                      sum = hn::MulAdd(query, pick<kChunk>(chunk...), sum);
                    });
                  });
                });
          });
        }
        store_lane_sums(d, dots, acc...);
      });
}

}  // namespace turbodecode::attention::HWY_NAMESPACE::simd
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
