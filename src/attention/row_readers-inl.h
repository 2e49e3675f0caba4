// Readers of the stored row formats of the KV cache: reader.load(d, row, j) gives elements
// [j, j + Lanes(d)) of the row at `row` as f32, before any norm scale. F16 rows are widened;
// TQ rows are codebook values of their codes. The decode kernel's dot products and weighted
// sums (row_dots-inl.h, row_accumulate-inl.h) take any reader. Readers hold no vectors (SVE
// vectors cannot be members), only pointers. Per-target code.
#if defined(TURBODECODE_ATTENTION_ROW_READERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TURBODECODE_ATTENTION_ROW_READERS_INL_H_
#undef TURBODECODE_ATTENTION_ROW_READERS_INL_H_
#else
#define TURBODECODE_ATTENTION_ROW_READERS_INL_H_
#endif

#include <bit>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::attention::HWY_NAMESPACE::simd {
namespace hn = hwy::HWY_NAMESPACE;

// The descriptor of the decode kernel's f32 vectors: the target's full width, at most 16 lanes
// (so every tile and row length of the kernel is a whole number of vectors).
using RowTag = hn::CappedTag<float, 16>;

// The codes of elements [j, j + Lanes(d)) as i32 lanes. 4-bit rows pack two codes per byte
// (even element in the low nibble); wider codes take a byte each, masked to their bit width so
// a corrupt high bit can never index past the codebook.
template <int Bits, class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> load_codes(D d, const std::uint8_t* row, int j) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint8_t, D> d8;
  if constexpr (Bits == 4 && hn::MaxLanes(d) == 1) {
    return hn::Set(di, (row[j / 2] >> (4 * (j % 2))) & 0x0f);
  } else if constexpr (Bits == 4) {
    // Each byte widened to 16 bits as [low nibble, high nibble]: read as bytes, that is one
    // code per byte in element order.
    const hn::RepartitionToWide<decltype(d8)> d16;
    const auto bytes =
        hn::PromoteTo(d16, hn::LoadU(hn::Rebind<std::uint8_t, decltype(d16)>(), row + j / 2));
    const auto split = hn::Or(hn::And(bytes, hn::Set(d16, 0x000f)),
                              hn::ShiftLeft<4>(hn::And(bytes, hn::Set(d16, 0x00f0))));
    return hn::PromoteTo(di, hn::BitCast(d8, split));
  } else {
    const auto codes = hn::PromoteTo(di, hn::LoadU(d8, row + j));
    if constexpr (Bits == 8) return codes;
    return hn::And(codes, hn::Set(di, (1 << Bits) - 1));
  }
}

// codebook[codes] for a codebook of 2^Bits entries. A codebook of at most two vectors of
// fixed width (4-bit codes from AVX2 up, 5-bit codes with AVX-512) stays in registers: one
// or two permutes and a select on the code's next bit, which leaves the load ports to the rows
// themselves. Larger codebooks are gathered: with four registers, 5-bit codes on AVX2 measure
// slower than the gather (docs/cpu-attention-bench.md).
template <int Bits, class D>
HWY_INLINE hn::Vec<D> lookup_codes(D d, const float* codebook,
                                   hn::Vec<hn::RebindToSigned<D>> codes) {
  constexpr int kEntries = 1 << Bits;
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(d));
  if constexpr (HWY_HAVE_SCALABLE || kLanes < 8 || kEntries > 2 * kLanes) {
    return hn::GatherIndex(d, codebook, codes);
  } else if constexpr (kEntries <= kLanes) {
    return hn::TableLookupLanes(hn::LoadU(d, codebook), hn::IndicesFromVec(d, codes));
  } else {
    const hn::RebindToSigned<D> di;
    const auto indices = hn::IndicesFromVec(d, hn::And(codes, hn::Set(di, kLanes - 1)));
    const auto low = hn::TableLookupLanes(hn::LoadU(d, codebook), indices);
    const auto high = hn::TableLookupLanes(hn::LoadU(d, codebook + kLanes), indices);
    // The code's bit that picks the table, moved into the sign.
    constexpr int kTableBit = std::countr_zero(static_cast<unsigned>(kLanes));
    return hn::IfNegativeThenElse(hn::BitCast(d, hn::ShiftLeft<31 - kTableBit>(codes)), high, low);
  }
}

struct F16Reader {
  template <class D>
  HWY_INLINE hn::Vec<D> load(D d, const std::uint8_t* row, int j) const {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + j));
  }
};

template <int Bits>
struct CodeReader {
  const float* codebook;
  template <class D>
  HWY_INLINE hn::Vec<D> load(D d, const std::uint8_t* row, int j) const {
    return lookup_codes<Bits>(d, codebook, load_codes<Bits>(d, row, j));
  }
};

}  // namespace turbodecode::attention::HWY_NAMESPACE::simd
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
