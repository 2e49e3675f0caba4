// The double-precision decode attention oracle itself (SPEC §1.6, §1.7, §2.8, §2.9): it reads
// paged caches through their block tables, decodes FP8 and bit-packed rows without rotating
// FP8, evaluates the rows of a query run as SPEC §2.8 says, and writes lse. The library's
// decode backends are checked against it elsewhere; these are the checks of its new parts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache_contents.h"
#include "common/f16.h"
#include "reference/attention_oracle.h"
#include "test_support.h"
#include "turbodecode/attention.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode {
namespace {

using testing::Batch;
using testing::BlockTable;
using testing::TokenRows;

constexpr int kKvHeads = 2;
constexpr int kHeads = 4;

KvCacheConfig config_of(RowFormat k_format, RowFormat v_format, LayerKind kind,
                        std::int64_t capacity, int page_size) {
  KvCacheConfig c;
  c.slots = 2;
  c.n_kv_heads = kKvHeads;
  c.capacity = capacity;
  c.head_dim = 256;
  c.kind = kind;
  c.k_format = k_format;
  c.v_format = v_format;
  c.page_size = page_size;
  c.pages = page_size ? c.slots * pages_per_slot(c) + 1 : 0;
  return c;
}

DecodeOptions options_of(LayerKind kind, int window, int query_tokens = 1) {
  DecodeOptions o;
  o.n_heads = kHeads;
  o.mask = kind == LayerKind::ring ? MaskKind::sliding_ring : MaskKind::causal;
  o.sliding_window = window;
  o.query_tokens = query_tokens;
  return o;
}

// A cache (paged through a shuffled block table drawn from `rng` when the config says so)
// filled by appending positions 0 … last of every slot, one step at a time, as decoding would.
struct FilledCache {
  FilledCache(const KvCacheConfig& config, std::mt19937_64& rng, std::int32_t last,
              std::uint64_t seed)
      : cache(config),
        table(config.page_size ? testing::shuffled_table(config, rng, false) : BlockTable{}) {
    view = config.page_size ? cache.view(table.view()) : cache.view();
    for (std::int32_t p = 0; p <= last; ++p) append(p, seed);
  }
  void append(std::int32_t position, std::uint64_t seed) {
    for (std::int32_t slot = 0; slot < view.config.slots; ++slot) {
      Batch batch{{slot}, {position}};
      const std::uint64_t token_seed = seed + 4 * static_cast<std::uint64_t>(position) + 2 * slot;
      const TokenRows k = testing::token_rows(1, kKvHeads, 256, DType::f32, token_seed);
      const TokenRows v = testing::token_rows(1, kKvHeads, 256, DType::bf16, token_seed + 1);
      append_kv(view, k.view, v.view, batch.slot_view(), batch.position_view());
      keys.push_back(k.widened);
      values.push_back(v.widened);
    }
  }
  // The unquantized K or V rows of `slot` for positions first … last, [positions, heads, D].
  std::vector<float> rows_of(const std::vector<std::vector<double>>& side, std::int32_t slot,
                             std::int32_t first, std::int32_t last) const {
    std::vector<float> rows;
    for (std::int32_t p = first; p <= last; ++p) {
      const auto& row = side[static_cast<std::size_t>(p * view.config.slots + slot)];
      rows.insert(rows.end(), row.begin(), row.end());
    }
    return rows;
  }

  KvCache cache;
  BlockTable table;
  KvCacheView view;
  std::vector<std::vector<double>> keys, values;  // [position · slots + slot] → [heads, D]
};

// A paged cache (shuffled pages of 16) and a contiguous one holding the same tokens give the
// same oracle results, bit for bit, for every format pair and layer kind.
TEST(AttentionOracle, ReadsPagedCachesThroughTheBlockTable) {
  const std::pair<RowFormat, RowFormat> formats[] = {{RowFormat::fp8, RowFormat::tq3},
                                                     {RowFormat::tq5, RowFormat::fp8},
                                                     {RowFormat::f16, RowFormat::tq6}};
  for (const auto& [k_format, v_format] : formats) {
    for (LayerKind kind : {LayerKind::linear, LayerKind::ring}) {
      const std::uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed) + " K " + format_name(k_format) + " V " +
                   format_name(v_format));
      std::mt19937_64 rng(seed);
      const std::int64_t capacity = 40;
      const std::int32_t last = kind == LayerKind::ring ? 93 : 39;
      const KvCacheConfig paged = config_of(k_format, v_format, kind, capacity, 16);
      const FilledCache contiguous_cache(config_of(k_format, v_format, kind, capacity, 0), rng,
                                         last, seed);
      const FilledCache paged_cache(paged, rng, last, seed);
      const DecodeOptions options = options_of(kind, kind == LayerKind::ring ? 30 : 0);
      const std::vector<std::int32_t> slots = {0, 1, 1}, positions = {last, last, last};
      const std::vector<float> q = testing::gaussian(3 * kHeads * 256, seed + 7);
      const auto want =
          oracle::decode_attention(contiguous_cache.view, options, q, slots, positions);
      const auto got = oracle::decode_attention(paged_cache.view, options, q, slots, positions);
      EXPECT_EQ(got.out, want.out);
      EXPECT_EQ(got.lse, want.lse);
    }
  }
}

// lse = ln Σ exp(score) over the visible positions: ln(count) for a zero query; for a row that
// sees one position, the capped, scaled score itself.
TEST(AttentionOracle, LseIsTheLogSumOfExpScores) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const FilledCache filled(config_of(RowFormat::f16, RowFormat::tq8, LayerKind::linear, 64, 0), rng,
                           40, seed);
  DecodeOptions options = options_of(LayerKind::linear, 0);
  const std::vector<float> zero(2 * kHeads * 256, 0.0f);
  const auto counted = oracle::decode_attention(filled.view, options, zero, {0, 1}, {0, 40});
  for (int h = 0; h < kHeads; ++h) {
    EXPECT_DOUBLE_EQ(counted.lse[h], 0.0);
    EXPECT_NEAR(counted.lse[kHeads + h], std::log(41.0), 1e-12);
  }
  options.mask = MaskKind::sliding_linear;
  options.sliding_window = 7;
  const auto windowed = oracle::decode_attention(filled.view, options, zero, {1}, {40});
  EXPECT_NEAR(windowed.lse[0], std::log(7.0), 1e-12);

  options = options_of(LayerKind::linear, 0);
  options.scale = 0.3f;
  options.softcap = 2.5f;
  const std::vector<float> q = testing::gaussian(kHeads * 256, seed + 1);
  const auto single = oracle::decode_attention(filled.view, options, q, {1}, {0});
  const std::vector<double>& k = filled.keys[1];  // position 0, slot 1: [heads, D]
  for (int h = 0; h < kHeads; ++h) {
    const int kv = h / (kHeads / kKvHeads);
    double dot = 0.0;
    for (int j = 0; j < 256; ++j) {
      const double stored =
          static_cast<double>(f16_to_f32(f32_to_f16(static_cast<float>(k[kv * 256 + j]))));
      dot += static_cast<double>(q[h * 256 + j]) * stored;
    }
    EXPECT_NEAR(single.lse[h], 2.5 * std::tanh(0.3f * dot / 2.5), 1e-9) << "head " << h;
  }
}

// FP8 rows are read as x̂ (never rotated) and TQ rows in the rotated basis: attention over the
// new formats stays close to exact attention over the unquantized rows.
TEST(AttentionOracle, NewFormatsApproximateExactAttention) {
  const struct {
    RowFormat k, v;
    double min_cosine;
  } cases[] = {{RowFormat::fp8, RowFormat::fp8, 0.99},   // measured 0.996 … 0.9996
               {RowFormat::fp8, RowFormat::tq3, 0.95},   // measured 0.979 … 0.985
               {RowFormat::tq3, RowFormat::tq5, 0.85}};  // measured 0.921 … 0.992
  for (const auto& c : cases) {
    for (int page_size : {0, 32}) {
      const std::uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed) + " K " + format_name(c.k) + " V " +
                   format_name(c.v) + " page size " + std::to_string(page_size));
      std::mt19937_64 rng(seed);
      const std::int32_t last = 63;
      const FilledCache filled(config_of(c.k, c.v, LayerKind::linear, 64, page_size), rng, last,
                               seed);
      const std::vector<float> q = testing::gaussian(kHeads * 256, seed + 1);
      for (std::int32_t slot : {0, 1}) {
        const auto got = oracle::decode_attention(filled.view, options_of(LayerKind::linear, 0), q,
                                                  {slot}, {last});
        const auto exact = oracle::exact_attention(q, filled.rows_of(filled.keys, slot, 0, last),
                                                   filled.rows_of(filled.values, slot, 0, last),
                                                   kHeads, kKvHeads, 256, 0.0, 0.0);
        const double cosine =
            testing::cosine(std::vector<float>(got.out.begin(), got.out.end()), exact);
        std::cout << "[ measured ] attention cosine K " << format_name(c.k) << " V "
                  << format_name(c.v) << " = " << cosine << "\n";
        EXPECT_GE(cosine, c.min_cosine);
      }
    }
  }
}

// SPEC §2.8 on a ring whose capacity is exactly window + run length − 1: after a whole draft of
// three tokens is appended, each row of the run gets what it gets from the cache as it was when
// its own token was the newest (the later tokens overwrote only rows outside its window).
TEST(AttentionOracle, QueryRunRowsSeeTheirOwnPrefix) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  constexpr int kRun = 3, kWindow = 20;
  const KvCacheConfig c =
      config_of(RowFormat::fp8, RowFormat::tq4, LayerKind::ring, kWindow + kRun - 1, 16);
  const std::int32_t last = 60;
  const std::vector<float> q = testing::gaussian(kRun * kHeads * 256, seed + 1);
  std::mt19937_64 rng(seed);
  const FilledCache after_draft(c, rng, last, seed);
  const std::vector<std::int32_t> slots(kRun, 1), positions = {last - 2, last - 1, last};
  const auto run = oracle::decode_attention(
      after_draft.view, options_of(LayerKind::ring, kWindow, kRun), q, slots, positions);
  for (int i = 0; i < kRun; ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    const FilledCache before(c, rng, positions[i], seed);
    const std::vector<float> q_row(q.begin() + i * kHeads * 256,
                                   q.begin() + (i + 1) * kHeads * 256);
    const auto alone = oracle::decode_attention(before.view, options_of(LayerKind::ring, kWindow),
                                                q_row, {1}, {positions[i]});
    EXPECT_TRUE(std::equal(alone.out.begin(), alone.out.end(), run.out.begin() + i * kHeads * 256));
    EXPECT_TRUE(std::equal(alone.lse.begin(), alone.lse.end(), run.lse.begin() + i * kHeads));
  }
  // Rows that are not runs of one slot at consecutive positions.
  const DecodeOptions runs = options_of(LayerKind::ring, kWindow, kRun);
  EXPECT_THROW(oracle::decode_attention(after_draft.view, runs, q, {1, 1, 0}, {58, 59, 60}),
               std::invalid_argument);
  EXPECT_THROW(oracle::decode_attention(after_draft.view, runs, q, {1, 1, 1}, {58, 60, 61}),
               std::invalid_argument);
  EXPECT_THROW(
      oracle::decode_attention(after_draft.view, runs, {q.begin(), q.begin() + 2 * kHeads * 256},
                               {1, 1}, {59, 60}),
      std::invalid_argument);
}

}  // namespace
}  // namespace turbodecode
