// Readers of the stored row formats of the KV cache: reader.load(d, row, j) gives elements
// [j, j + Lanes(d)) of the row at `row` as f32, before any norm or scale. F16 rows are
// widened; TQ rows are codebook values of their codes; FP8 rows are their E4M3 values / 256. The
// decode kernel's dot products and weighted sums (row_dots-inl.h, row_accumulate-inl.h) take any
// reader. Readers hold no vectors (SVE vectors cannot be members), only pointers. Per-target code.
#if defined(TURBODECODE_ATTENTION_ROW_READERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TURBODECODE_ATTENTION_ROW_READERS_INL_H_
#undef TURBODECODE_ATTENTION_ROW_READERS_INL_H_
#else
#define TURBODECODE_ATTENTION_ROW_READERS_INL_H_
#endif

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/simd/vector_pack-inl.h"
#include "hwy/highway.h"
#include "tq/codec_math.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::attention::HWY_NAMESPACE::simd {
namespace hn = hwy::HWY_NAMESPACE;
using turbodecode::simd::HWY_NAMESPACE::with_vectors;

// The descriptor of the decode kernel's f32 vectors: the target's full width, at most 16 lanes
// (so every tile and row length of the kernel is a whole number of vectors).
using RowTag = hn::CappedTag<float, 16>;

#if HWY_TARGET == HWY_SCALAR

// The code of element j of a 3-, 5- or 6-bit row (SPEC §1.5), read alone.
template <int Bits, class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> load_packed_codes(D d, const std::uint8_t* row, int j) {
  return hn::Set(hn::RebindToSigned<D>(), tq::read_code(row, Bits, j));
}

// The code of element j of a 4-bit row (two per byte, even element in the low nibble).
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> load_nibble_codes(D d, const std::uint8_t* row, int j) {
  return hn::Set(hn::RebindToSigned<D>(), (row[j / 2] >> (4 * (j % 2))) & 0x0f);
}

#else

// The codes of elements [j, j + Lanes(d)) of a 4-bit row (two per byte, even element in the
// low nibble). Up to 8 codes fill at most 4 bytes: one integer, broadcast, lane k shifted down
// by 4k (AVX2: 3 vector operations). Wider vectors widen each byte to 16 bits as [low nibble,
// high nibble], which read as bytes is one code per byte in element order.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> load_nibble_codes(D d, const std::uint8_t* row, int j) {
  const hn::RebindToSigned<D> di;
  if constexpr (!HWY_HAVE_SCALABLE && hn::MaxLanes(d) <= 8) {
    const hn::RebindToUnsigned<D> du;
    std::uint32_t word = 0;
    std::memcpy(&word, row + j / 2, hn::MaxLanes(d) / 2);
    const auto shifts = hn::ShiftLeft<2>(hn::Iota(du, 0));
    return hn::BitCast(di, hn::And(hn::Set(du, word) >> shifts, hn::Set(du, 0x0f)));
  } else {
    const hn::Rebind<std::uint8_t, D> d8;
    const hn::RepartitionToWide<decltype(d8)> d16;
    const auto bytes =
        hn::PromoteTo(d16, hn::LoadU(hn::Rebind<std::uint8_t, decltype(d16)>(), row + j / 2));
    const auto split = hn::Or(hn::And(bytes, hn::Set(d16, 0x000f)),
                              hn::ShiftLeft<4>(hn::And(bytes, hn::Set(d16, 0x00f0))));
    return hn::PromoteTo(di, hn::BitCast(d8, split));
  }
}

// The little-endian integer of Bytes (1 to 8) bytes, built in a register from whole loads:
// a narrow memcpy into a stack integer would make its vector broadcast wait on a failed store
// forward.
template <int Bytes>
HWY_INLINE std::uint64_t little_endian_bytes(const std::uint8_t* p) {
  static_assert(Bytes >= 1 && Bytes <= 8);
  if constexpr (std::has_single_bit(static_cast<unsigned>(Bytes))) {
    using Word = std::conditional_t<
        Bytes == 8, std::uint64_t,
        std::conditional_t<Bytes == 4, std::uint32_t,
                           std::conditional_t<Bytes == 2, std::uint16_t, std::uint8_t>>>;
    Word word;
    std::memcpy(&word, p, sizeof word);
    return word;
  } else {
    constexpr int kLow = Bytes > 4 ? 4 : 2;
    return little_endian_bytes<kLow>(p) | little_endian_bytes<Bytes - kLow>(p + kLow)
                                              << (8 * kLow);
  }
}

// Codes first … first + Lanes(d64) − 1 of a 3-, 5- or 6-bit row, one per 64-bit lane, all of
// one group (SPEC §1.5: a little-endian bit stream in which each group of eight codes fills
// Bits bytes): the group's Bits bytes, and no byte beyond them, read as one integer,
// broadcast, and code k of the group shifted down by Bits·k.
template <int Bits, class D64>
HWY_INLINE hn::Vec<D64> group_codes(D64 d64, const std::uint8_t* row, int first) {
  alignas(64) static constexpr std::uint64_t kShifts[8] = {0,        Bits,     2 * Bits, 3 * Bits,
                                                           4 * Bits, 5 * Bits, 6 * Bits, 7 * Bits};
  const std::uint64_t group = little_endian_bytes<Bits>(row + first / 8 * Bits);
  const auto broadcast = hn::Set(d64, group);
  const auto shifts = hn::LoadU(d64, kShifts + first % 8);
#if HWY_HAVE_SCALABLE  // sizeless vector types take no operators
  const auto shifted = hn::Shr(broadcast, shifts);
#else
  const auto shifted = broadcast >> shifts;
#endif
  return hn::And(shifted, hn::Set(d64, (std::uint64_t{1} << Bits) - 1));
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// Lane i of load_run_codes, for a run that starts at byte Skew of each block: the bytes to
// pick (byte Skew + (i·Bits)/8 and the next, then any byte of the block above them) and the
// shift, (i·Bits) mod 8.
template <int Lanes>
struct RunPattern {
  alignas(64) std::uint8_t pick[4 * Lanes];
  alignas(64) std::uint32_t shift[Lanes];
};

template <int Bits, int Lanes, int Skew>
constexpr RunPattern<Lanes> run_pattern() {
  RunPattern<Lanes> t{};
  for (int i = 0; i < Lanes; ++i) {
    const int first = Skew + i * Bits / 8;
    for (int b = 0; b < 4; ++b) t.pick[4 * i + b] = static_cast<std::uint8_t>(first + (b > 0));
    t.shift[i] = static_cast<std::uint32_t>(i * Bits % 8);
  }
  return t;
}

#if HWY_TARGET <= HWY_AVX3
// A run of Bytes <= 8 bytes in bytes [8 − Bytes, 8) of every 64-bit lane of an AVX-512 vector,
// in one broadcast load: of the 8 bytes that end where the run does, which lie within the row
// when the run is not its first (a row's first two runs fill at least 8 bytes); a row's first
// run reads the 8 bytes that start with it instead and moves them up in each 128-bit block
// (one more operation). No byte outside the row is read.
template <int Bytes>
HWY_INLINE __m512i run_at_word_end(const std::uint8_t* run, bool first_of_row) {
  static_assert(Bytes <= 8 && 2 * Bytes >= 8);
  const auto word = [](const std::uint8_t* start) {
    return _mm512_set1_epi64(static_cast<long long>(little_endian_bytes<8>(start)));
  };
  if constexpr (Bytes == 8) return word(run);
  if (first_of_row) return _mm512_bslli_epi128(word(run), 8 - Bytes);
  return word(run + Bytes - 8);
}
#endif

// The run's Bytes bytes at `run`, and no byte beyond them, in the low bytes of every 128-bit
// block of a vector of Bytes <= 16 bytes. AVX-512 loads them masked and copies the block (two
// operations); AVX2 builds them from two integers.
template <int Bytes, class D8>
HWY_INLINE hn::Vec<D8> run_in_every_block(D8 d8, const std::uint8_t* run) {
  static_assert(Bytes <= 16);
#if HWY_TARGET <= HWY_AVX3
  if constexpr (hn::MaxLanes(D8()) == 64) {
    const __m128i block = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << Bytes) - 1), run);
    return hn::Vec<D8>{_mm512_broadcast_i32x4(block)};
  }
#endif
  const hn::Repartition<std::uint64_t, D8> d64;
  std::uint64_t low = 0, high = 0;
  if constexpr (Bytes <= 8) {
    low = little_endian_bytes<Bytes>(run);
  } else {
    low = little_endian_bytes<8>(run);
    high = little_endian_bytes<Bytes - 8>(run + 8);
  }
  return hn::BitCast(d8, hn::InterleaveLower(d64, hn::Set(d64, low), hn::Set(d64, high)));
}

// Whether lookup_codes reads only a code's low Bits bits, so that the codes it is given may
// carry other bits above them: true for the AVX-512 permutes (they index by the low bits).
template <class D>
inline constexpr bool kLookupIgnoresHighBits = (HWY_TARGET <= HWY_AVX3) && hn::MaxLanes(D()) == 16;

// The codes of elements [j, j + 8) (AVX2) or [j, j + 16) (AVX-512) of a 3- to 6-bit row as i32
// lanes: the run's Lanes(d)·Bits/8 bytes in every 128-bit block (run_in_every_block; on
// AVX-512 runs of at most 8 bytes, 3- and 4-bit codes, run_at_word_end); one in-block byte
// shuffle moves the two bytes code i starts in to the low half of lane i, and a shift by lane
// leaves the code in the low Bits bits. AVX2 then masks them (6 vector operations for 16
// codes; two groups, below, take 11); on AVX-512 the lookup ignores the bits above, so 16
// codes take a load and three operations (3- and 4-bit codes: a broadcast load and two).
template <int Bits, class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> load_run_codes(D d, const std::uint8_t* row, int j) {
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(D()));
  static_assert(kLanes == 8 || kLanes == 16);
  constexpr int kBytes = kLanes * Bits / 8;
  const hn::RebindToUnsigned<D> du;
  const hn::Repartition<std::uint8_t, decltype(du)> d8;
  const std::uint8_t* run = row + j / 8 * Bits;
#if HWY_TARGET <= HWY_AVX3
  constexpr bool kWordRun = kLanes == 16 && kBytes <= 8;
#else
  constexpr bool kWordRun = false;
#endif
  constexpr int kSkew = kWordRun ? 8 - kBytes : 0;
  const auto bytes = [&] {
#if HWY_TARGET <= HWY_AVX3
    if constexpr (kWordRun) {
      return hn::Vec<decltype(d8)>{run_at_word_end<kBytes>(run, j == 0)};
    } else
#endif
    {
      return run_in_every_block<kBytes>(d8, run);
    }
  }();
  static constexpr RunPattern<kLanes> kPattern = run_pattern<Bits, kLanes, kSkew>();
  const auto pairs = hn::BitCast(du, hn::TableLookupBytes(bytes, hn::Load(d8, kPattern.pick)));
  auto codes = pairs >> hn::Load(du, kPattern.shift);
  if constexpr (!kLookupIgnoresHighBits<D>) {
    codes = hn::And(codes, hn::Set(du, (std::uint32_t{1} << Bits) - 1));
  }
  return hn::BitCast(hn::RebindToSigned<D>(), codes);
}
#endif

// The codes of elements [j, j + Lanes(d)) of a 3-, 5- or 6-bit row as i32 lanes. Lanes(d) is
// 4, 8 or 16 and j a multiple of it. x86 vectors of 8 or 16 lanes read the run at once
// (load_run_codes); others take two halves of 64-bit lanes (group_codes), each within one
// group, their low 32 bits packed together.
template <int Bits, class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> load_packed_codes(D d, const std::uint8_t* row, int j) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  if constexpr (hn::MaxLanes(D()) >= 8) return load_run_codes<Bits>(d, row, j);
#endif
  const hn::RebindToUnsigned<D> du;
  const hn::Repartition<std::uint64_t, decltype(du)> d64;
  const int half = static_cast<int>(hn::Lanes(d64));
  const auto low = hn::BitCast(du, group_codes<Bits>(d64, row, j));
  const auto high = hn::BitCast(du, group_codes<Bits>(d64, row, j + half));
  return hn::BitCast(hn::RebindToSigned<D>(), hn::ConcatEven(du, high, low));
}

#endif  // HWY_TARGET == HWY_SCALAR

// The codes of elements [j, j + Lanes(d)) as i32 lanes. 4-bit rows pack two codes per byte
// (even element in the low nibble), 8-bit rows take a byte each, 3-, 5- and 6-bit rows are
// bit-packed (above); every width is masked to its bits, so no code indexes past the codebook.
template <int Bits, class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> load_codes(D d, const std::uint8_t* row, int j) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint8_t, D> d8;
  if constexpr (Bits == 4) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    if constexpr (hn::MaxLanes(D()) == 16) return load_run_codes<4>(d, row, j);
#endif
    return load_nibble_codes(d, row, j);
  } else if constexpr (Bits == 8) {
    return hn::PromoteTo(di, hn::LoadU(d8, row + j));
  } else {
    return load_packed_codes<Bits>(d, row, j);
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3  // the AVX-512 targets

// table[index] for a table of Entries (32, 64 or 128) floats on AVX-512: one two-register
// permute (vpermt2ps, 32 entries on the index's low 5 bits) per 32 entries, the results paired
// in a tree of selects on the index's bits 5 and 6.
template <int Entries, class D>
HWY_INLINE hn::Vec<D> permute_lookup(D d, const float* table,
                                     hn::Vec<hn::RebindToSigned<D>> index) {
  static_assert(hn::MaxLanes(D()) == 16 && Entries % 32 == 0 && Entries <= 128);
  constexpr int kTables = Entries / 32;
  const hn::RebindToSigned<D> di;
  hn::Vec<D> found[kTables];
  for (int t = 0; t < kTables; ++t) {
    found[t] = hn::Vec<D>{_mm512_permutex2var_ps(_mm512_loadu_ps(table + 32 * t), index.raw,
                                                 _mm512_loadu_ps(table + 32 * t + 16))};
  }
  for (int bit = 5, n = kTables; n > 1; ++bit, n /= 2) {
    const auto upper = hn::RebindMask(d, hn::TestBit(index, hn::Set(di, 1 << bit)));
    for (int t = 0; t < n / 2; ++t) {
      found[t] = hn::IfThenElse(upper, found[2 * t + 1], found[2 * t]);
    }
  }
  return found[0];
}

// codebook[codes] on AVX-512, from registers, reading only each code's low Bits bits
// (kLookupIgnoresHighBits): 3-bit codes permute in the codebook repeated over 16 lanes, 4-bit
// codes in the codebook, 5-bit codes in two registers (permute_lookup). A codebook is odd
// about its middle (tq/tables.h), so 6- and 8-bit codes read its lower half only: a code in
// the upper half reads entry 2^Bits − 1 − code, negated (8-bit codes: 4 permutes, 3 selects
// and 4 integer operations per vector; the half codebook's 8 registers stay across a tile).
template <int Bits, class D>
HWY_INLINE hn::Vec<D> lookup_in_registers(D d, const float* codebook,
                                          hn::Vec<hn::RebindToSigned<D>> codes) {
  if constexpr (Bits == 3) {
    const __m512 table = _mm512_broadcast_f32x8(_mm256_loadu_ps(codebook));
    return hn::Vec<D>{_mm512_permutexvar_ps(codes.raw, table)};
  } else if constexpr (Bits == 4) {
    return hn::Vec<D>{_mm512_permutexvar_ps(codes.raw, _mm512_loadu_ps(codebook))};
  } else if constexpr (Bits == 5) {
    return permute_lookup<32>(d, codebook, codes);
  } else {
    constexpr int kHalf = 1 << (Bits - 1);
    const hn::RebindToSigned<D> di;
    const auto upper_half = hn::ShiftRight<31>(hn::ShiftLeft<32 - Bits>(codes));  // 0 or −1
    const auto index = hn::Xor(codes, hn::And(upper_half, hn::Set(di, kHalf - 1)));
    const auto sign = hn::BitCast(d, hn::And(upper_half, hn::Set(di, INT32_MIN)));
    return hn::Xor(permute_lookup<kHalf>(d, codebook, index), sign);
  }
}

// The 8-bit codes of elements [j, j + 32) (j a multiple of 32) as f32 on AVX-512, two vectors,
// from the lower half codebook (odd about its middle, as above) split into the 16-bit halves
// of its entries (`low`, `high`: 128 words each, four registers). One 32-word vector of codes,
// arranged so that the two word interleaves at the end come out in element order, looks up
// both halves at once: per 32 codes 4 two-register word permutes, 2 selects on bit 6, the sign
// on the high halves and 2 interleaves, against 8 permutes and 6 selects for two f32 vectors.
// Two vectors of a row: elements [j, j + Lanes) and [j + Lanes, j + 2·Lanes).
template <class V>
struct VectorPair {
  V first, second;
};

HWY_INLINE VectorPair<__m512i> lookup_8bit_pair(const std::uint16_t* low, const std::uint16_t* high,
                                         const std::uint8_t* row, int j) {
  // Word 8b + r holds element 4b + r and word 8b + 4 + r element 16 + 4b + r (b < 4, r < 4):
  // the in-block interleaves of words 0-3 and 4-7 of each 128-bit block then give elements
  // 0-15 and 16-31 in order.
  static constexpr auto kOrder = [] {
    struct Table {
      alignas(64) std::uint16_t word[32];
    } t{};
    for (int b = 0; b < 4; ++b) {
      for (int r = 0; r < 4; ++r) {
        t.word[8 * b + r] = static_cast<std::uint16_t>(4 * b + r);
        t.word[8 * b + 4 + r] = static_cast<std::uint16_t>(16 + 4 * b + r);
      }
    }
    return t;
  }();
  const auto table = [](const std::uint16_t* words, int k) {
    return _mm512_load_si512(words + 32 * k);
  };
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j));
  const __m512i codes =
      _mm512_permutexvar_epi16(_mm512_load_si512(kOrder.word), _mm512_cvtepu8_epi16(bytes));
  const __m512i top_bit = _mm512_slli_epi16(codes, 8);  // code bit 7 at bit 15
  const __m512i index = _mm512_xor_si512(codes, _mm512_srai_epi16(top_bit, 15));
  const __mmask32 upper = _mm512_test_epi16_mask(index, _mm512_set1_epi16(64));
  const __m512i low_half =
      _mm512_mask_blend_epi16(upper, _mm512_permutex2var_epi16(table(low, 0), index, table(low, 1)),
                              _mm512_permutex2var_epi16(table(low, 2), index, table(low, 3)));
  const __m512i high_half = _mm512_xor_si512(
      _mm512_mask_blend_epi16(upper,
                              _mm512_permutex2var_epi16(table(high, 0), index, table(high, 1)),
                              _mm512_permutex2var_epi16(table(high, 2), index, table(high, 3))),
      _mm512_and_si512(top_bit, _mm512_set1_epi16(static_cast<short>(0x8000))));
  return {_mm512_unpacklo_epi16(low_half, high_half), _mm512_unpackhi_epi16(low_half, high_half)};
}

#endif  // AVX-512

// codebook[codes] for a codebook of 2^Bits entries. AVX-512 keeps every codebook in registers
// (lookup_in_registers); on AVX2 a codebook of one or two vectors (3- and 4-bit codes) does:
// one or two permutes and a select on the code's next bit. Either leaves the load ports to the
// rows themselves. Other codebooks are gathered: with four registers, 5-bit codes on AVX2
// measure slower than the gather (docs/cpu-attention-bench.md).
template <int Bits, class D>
HWY_INLINE hn::Vec<D> lookup_codes(D d, const float* codebook,
                                   hn::Vec<hn::RebindToSigned<D>> codes) {
  constexpr int kEntries = 1 << Bits;
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(d));
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3  // the AVX-512 targets
  if constexpr (kLanes == 16) return lookup_in_registers<Bits>(d, codebook, codes);
#endif
  if constexpr (HWY_HAVE_SCALABLE || kLanes < 8 || kEntries > 2 * kLanes) {
    return hn::GatherIndex(d, codebook, codes);
  } else if constexpr (kEntries == kLanes) {
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

// E4M3 bytes (SPEC §1.6) moved into f16 bits, sign to bit 15 and exponent and mantissa to bits
// 7-13: the f16 of the E4M3 value / 256, exactly (subnormals too, as f16 subnormals, which the
// widening converts exactly). Each byte is sign-extended to 16 bits and shifted left by 7, so
// bit 15 holds the sign; clearing bits 14 and 0-6 leaves the f16 (three operations). The row
// scale carries the 256 (kFp8ReaderScale, cache_rows.h). 0x7f and 0xff are NaN in E4M3 but
// ±480 / 256 this way, a magnitude no finite E4M3 value has (the largest is 448), so lanes of
// that magnitude are set to NaN after widening (the widening of targets without F16C would not
// keep an f16 NaN).
struct Fp8Reader {
  static constexpr float kNanCodeValue = 480.0f / 256.0f;
  template <class D>
  HWY_INLINE hn::Vec<D> load(D d, const std::uint8_t* row, int j) const {
    const hn::Rebind<std::int8_t, D> d8;
    const hn::Rebind<std::int16_t, D> d16;
    const hn::Rebind<hwy::float16_t, D> dh;
    const auto bytes =
        hn::PromoteTo(d16, hn::LoadU(d8, reinterpret_cast<const std::int8_t*>(row) + j));
    const auto half =
        hn::And(hn::ShiftLeft<7>(bytes), hn::Set(d16, static_cast<std::int16_t>(0xbf80)));
    const auto value = hn::PromoteTo(d, hn::BitCast(dh, half));
    return hn::IfThenElse(hn::Eq(hn::Abs(value), hn::Set(d, kNanCodeValue)), hn::Set(d, NAN),
                          value);
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

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// 8-bit codes on AVX-512: load() as every CodeReader (lookup_in_registers); pair() reads 32
// codes at once from the lower half codebook split into 16-bit halves once per reader
// (lookup_8bit_pair), for callers that take a row's vectors two by two.
template <>
struct CodeReader<8> {
  // A reader is made per tile and side: the split is a few vector instructions.
  explicit CodeReader(const float* codebook) : codebook(codebook) {
    const auto halves = [codebook](int k, int shift) {
      const __m512i a = _mm512_srli_epi32(_mm512_loadu_si512(codebook + 32 * k), shift);
      const __m512i b = _mm512_srli_epi32(_mm512_loadu_si512(codebook + 32 * k + 16), shift);
      return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(a)),
                                _mm512_cvtepi32_epi16(b), 1);
    };
    for (int k = 0; k < 4; ++k) {
      _mm512_store_si512(low + 32 * k, halves(k, 0));
      _mm512_store_si512(high + 32 * k, halves(k, 16));
    }
  }
  template <class D>
  HWY_INLINE hn::Vec<D> load(D d, const std::uint8_t* row, int j) const {
    return lookup_codes<8>(d, codebook, load_codes<8>(d, row, j));
  }
  // j a multiple of 32.
  template <class D>
  HWY_INLINE VectorPair<hn::Vec<D>> pair(D d, const std::uint8_t* row, int j) const {
    static_assert(hn::MaxLanes(D()) == 16);
    const VectorPair<__m512i> words = lookup_8bit_pair(low, high, row, j);
    const hn::RebindToSigned<D> di;
    return {hn::BitCast(d, hn::Vec<decltype(di)>{words.first}),
            hn::BitCast(d, hn::Vec<decltype(di)>{words.second})};
  }
  const float* codebook;
  alignas(64) std::uint16_t low[128];
  alignas(64) std::uint16_t high[128];
};
#endif

// Elements [begin + j, begin + j + Lanes(d)) of the row at rows[t] through a reader, and two
// vectors at once (j a multiple of 2·Lanes(d)) where the reader reads them so.
template <class D, class Reader>
struct RowsOfReader {
  const Reader& reader;
  const std::uint8_t* const* rows;
  int begin;
  HWY_INLINE hn::Vec<D> operator()(int t, int j) const {
    return reader.load(D(), rows[t], begin + j);
  }
  HWY_INLINE auto pair(int t, int j) const
    requires requires(const std::uint8_t* row) { reader.pair(D(), row, 0); }
  {
    return reader.pair(D(), rows[t], begin + j);
  }
};

// body(v_0, ..., v_{Chunks − 1}) with v_c = value(t, j + c·Lanes(d)); a source that also reads
// two vectors at once (value.pair(t, j), where j is a multiple of 2·Lanes(d)) is asked by pairs.
template <int Chunks, class D, class Values, class Body>
HWY_INLINE void with_row_chunks(D d, const Values& value, int t, int j, const Body& body) {
  const int lanes = static_cast<int>(hn::Lanes(d));
  if constexpr (Chunks % 2 == 0 && requires { value.pair(t, j); }) {
    hn::Vec<D> second = hn::Zero(d);
    with_vectors<Chunks>(
        [&](auto c) TD_INLINE_LAMBDA {
          constexpr int kChunk = decltype(c)::value;
          if constexpr (kChunk % 2 == 0) {
            const auto both = value.pair(t, j + kChunk * lanes);
            second = both.second;
            return both.first;
          } else {
            return second;
          }
        },
        body);
  } else {
    with_vectors<Chunks>(
        [&](auto c) TD_INLINE_LAMBDA { return value(t, j + decltype(c)::value * lanes); }, body);
  }
}

}  // namespace turbodecode::attention::HWY_NAMESPACE::simd
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
