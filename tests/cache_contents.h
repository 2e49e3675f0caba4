// Host caches for the KV cache tests (CPU backend): storage snapshots, token rows in any dtype,
// block tables, where SPEC §1.3 and §1.7 put a token's row (computed here from the SPEC, not by
// the library), and the check of a stored row against the oracle's encoding of its input.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/f16.h"
#include "reference/fp8_oracle.h"
#include "reference/tq_oracle.h"
#include "test_support.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::testing {

// The four storage views of a cache, with names for messages.
inline std::vector<std::pair<std::string, TensorView>> parts_of(const KvCacheView& v) {
  return {{"k", v.k}, {"k_norms", v.k_norms}, {"v", v.v}, {"v_norms", v.v_norms}};
}

// Every byte of the cache's storage, part by part.
inline std::vector<std::vector<std::uint8_t>> snapshot(const KvCacheView& view) {
  std::vector<std::vector<std::uint8_t>> bytes;
  for (const auto& [name, part] : parts_of(view)) {
    const auto* begin = static_cast<const std::uint8_t*>(part.data);
    bytes.emplace_back(begin, begin + (part.present() ? part.span_bytes() : 0));
  }
  return bytes;
}

// Random bytes everywhere, so that "unchanged" cannot be mistaken for "still zero".
inline void scramble(const KvCacheView& view, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const auto& [name, part] : parts_of(view)) {
    if (!part.present()) continue;
    auto* bytes = static_cast<std::uint8_t*>(part.data);
    const std::int64_t count = part.span_bytes();
    for (std::int64_t i = 0; i < count; ++i) bytes[i] = static_cast<std::uint8_t>(rng());
  }
}

// Tokens' rows [n, n_kv_heads, D] stored in `dtype`, and the values the library sees.
struct TokenRows {
  std::vector<std::uint8_t> storage;
  TensorView view;
  std::vector<double> widened;

  std::vector<double> row(std::int64_t token, std::int64_t head) const {
    const std::int64_t heads = view.shape[1], d = view.shape[2];
    const auto first = widened.begin() + (token * heads + head) * d;
    return {first, first + d};
  }
};

inline TokenRows token_rows(std::int64_t n, int heads, int head_dim, DType dtype,
                            std::uint64_t seed) {
  const std::vector<float> values =
      gaussian(static_cast<std::size_t>(n * heads * head_dim), seed, 2.0f);
  TokenRows t;
  t.storage.resize(std::max<std::size_t>(1, values.size() * dtype_bytes(dtype)));
  t.view = TensorView::contiguous(t.storage.data(), dtype, {n, heads, head_dim});
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::f32) {
      t.view.as<float>()[i] = values[i];
      t.widened.push_back(values[i]);
      continue;
    }
    const std::uint16_t bits = dtype == DType::f16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
    t.view.as<std::uint16_t>()[i] = bits;
    t.widened.push_back(dtype == DType::f16 ? f16_to_f32(bits) : bf16_to_f32(bits));
  }
  return t;
}

struct Batch {
  std::vector<std::int32_t> slots, positions;
  TensorView slot_view() { return TensorView::contiguous(slots.data(), DType::i32, {n()}); }
  TensorView position_view() { return TensorView::contiguous(positions.data(), DType::i32, {n()}); }
  std::int64_t n() const { return static_cast<std::int64_t>(slots.size()); }
};

// A block table [slots, pages_per_slot] on the host (empty for a contiguous cache).
struct BlockTable {
  std::vector<std::int32_t> entries;
  std::int64_t per_slot = 0;
  TensorView view() {
    if (entries.empty()) return {};
    const auto slots = static_cast<std::int64_t>(entries.size()) / per_slot;
    return TensorView::contiguous(entries.data(), DType::i32, {slots, per_slot});
  }
};

// Every slot gets distinct pages drawn in random order from the cache's pages; with
// `shared_prefix`, every slot's first page is slot 0's (prefix sharing).
inline BlockTable shuffled_table(const KvCacheConfig& c, std::mt19937_64& rng, bool shared_prefix) {
  BlockTable table;
  table.per_slot = pages_per_slot(c);
  std::vector<std::int32_t> pages(static_cast<std::size_t>(c.pages));
  for (std::size_t p = 0; p < pages.size(); ++p) pages[p] = static_cast<std::int32_t>(p);
  std::shuffle(pages.begin(), pages.end(), rng);
  for (std::int64_t s = 0; s < c.slots; ++s) {
    for (std::int64_t j = 0; j < table.per_slot; ++j) {
      const bool shared = shared_prefix && j == 0;
      table.entries.push_back(pages[static_cast<std::size_t>(shared ? 0 : s * table.per_slot + j)]);
    }
  }
  return table;
}

// The storage row of (slot, position): block (a slot, or a page) and row in it, by SPEC §1.3
// and §1.7.
struct Placement {
  std::int64_t block, row;
  bool operator==(const Placement&) const = default;
};

inline Placement placement(const KvCacheConfig& c, const BlockTable& table, std::int64_t slot,
                           std::int64_t position) {
  const std::int64_t logical = c.kind == LayerKind::ring ? position % c.capacity : position;
  if (c.page_size == 0) return {slot, logical};
  const std::int64_t page = table.entries[slot * table.per_slot + logical / c.page_size];
  return {page, logical % c.page_size};
}

inline const std::uint8_t* row_bytes_at(const TensorView& part, std::int64_t block,
                                        std::int64_t head, std::int64_t row) {
  return static_cast<const std::uint8_t*>(part.data) +
         (block * part.strides[0] + head * part.strides[1] + row * part.strides[2]) *
             static_cast<std::int64_t>(dtype_bytes(part.dtype));
}

// One stored row (and its norms or scale) against what the oracle says the input row becomes:
// F16 bitwise, TQ and FP8 codes equal but for one step where the oracle's value sits within
// rounding of a boundary, side values within 1e-6 relative.
inline void expect_stored_row(const KvCacheConfig& c, RowFormat format, const TensorView& rows,
                              const TensorView& norms, const Placement& at, std::int64_t head,
                              const std::vector<double>& x) {
  const int d = c.head_dim;
  const std::uint8_t* stored = row_bytes_at(rows, at.block, head, at.row);
  if (format == RowFormat::f16) {
    const auto* halves = reinterpret_cast<const std::uint16_t*>(stored);
    for (int j = 0; j < d; ++j) {
      ASSERT_EQ(halves[j], f32_to_f16(static_cast<float>(x[j]))) << "f16 element " << j;
    }
    return;
  }
  const auto* got_scales =
      reinterpret_cast<const float*>(row_bytes_at(norms, at.block, head, at.row));
  if (format == RowFormat::fp8) {
    const auto want = oracle::fp8_encode(x);
    ASSERT_NEAR(got_scales[0], want.scale, 1e-6 * want.scale) << "fp8 scale";
    for (int j = 0; j < d; ++j) {
      if (stored[j] == want.codes[j]) continue;
      ASSERT_TRUE(std::abs(stored[j] - want.codes[j]) == 1 &&
                  oracle::fp8_boundary_distance(want.scaled[j]) <= oracle::kFp8BoundaryTolerance)
          << "fp8 code " << j << ": " << int{stored[j]} << " vs oracle " << want.codes[j];
    }
    return;
  }
  const int bits = format_bits(format);
  const auto want = oracle::tq_encode(d, bits, c.scale_factor_d512, x);
  const auto got = oracle::tq_unpack_codes(d, bits, stored);
  for (int b = 0; b < norms_per_row(d); ++b) {
    ASSERT_NEAR(got_scales[b], want.norms[b], 1e-6 * want.norms[b]) << "norm " << b;
  }
  for (int j = 0; j < d; ++j) {
    if (got[j] == want.codes[j]) continue;
    ASSERT_TRUE(std::abs(got[j] - want.codes[j]) == 1 &&
                oracle::tq_boundary_distance(bits, want.scaled[j]) <= oracle::kTqBoundaryTolerance)
        << "code " << j << ": " << got[j] << " vs oracle " << want.codes[j];
  }
}

}  // namespace turbodecode::testing
