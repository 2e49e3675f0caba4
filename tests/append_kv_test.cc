// append_kv on the CPU backend (SPEC §1.3, §1.7): for every row format, contiguous and paged
// caches (pages of 16 to 128 rows, shuffled and shared), linear and ring layers, the named rows
// hold what the oracle encodes and no other byte of the storage changes.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cache_contents.h"
#include "test_support.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode {
namespace {

using testing::Batch;
using testing::BlockTable;
using testing::Placement;
using testing::TokenRows;

struct CacheCase {
  int head_dim;
  RowFormat k_format, v_format;
  LayerKind kind;
  int page_size;  // 0: contiguous
};

std::string label(const CacheCase& c) {
  return "D " + std::to_string(c.head_dim) + " K " + format_name(c.k_format) + " V " +
         format_name(c.v_format) + (c.kind == LayerKind::ring ? " ring" : " linear") +
         (c.page_size ? " pages of " + std::to_string(c.page_size) : " contiguous");
}

// Three slots of two and a half pages (contiguous: 5 rows), and three spare pages no table
// names.
KvCacheConfig config_of(const CacheCase& c) {
  KvCacheConfig config;
  config.slots = 3;
  config.n_kv_heads = 2;
  config.capacity = c.page_size ? c.page_size * 5 / 2 : 5;
  config.head_dim = c.head_dim;
  config.kind = c.kind;
  config.k_format = c.k_format;
  config.v_format = c.v_format;
  config.scale_factor_d512 = c.head_dim == 512 && c.kind == LayerKind::ring ? 1.5f : 1.0f;
  config.page_size = c.page_size;
  config.pages = c.page_size ? config.slots * pages_per_slot(config) + 3 : 0;
  return config;
}

// `n` tokens naming distinct storage rows (ring positions drawn over several laps).
Batch random_batch(const KvCacheConfig& c, const BlockTable& table, int n, std::mt19937_64& rng) {
  Batch batch;
  std::vector<Placement> used;
  const std::int64_t laps = c.kind == LayerKind::ring ? 4 : 1;
  while (batch.n() < n) {
    const auto slot = static_cast<std::int32_t>(rng() % c.slots);
    const auto position = static_cast<std::int32_t>(rng() % (laps * c.capacity));
    const Placement at = testing::placement(c, table, slot, position);
    if (std::find(used.begin(), used.end(), at) != used.end()) continue;
    used.push_back(at);
    batch.slots.push_back(slot);
    batch.positions.push_back(position);
  }
  return batch;
}

// Every storage row either holds its token's K and V, or kept its bytes from `before`.
void expect_only_batch_rows_written(const KvCacheView& view,
                                    const std::vector<std::vector<std::uint8_t>>& before,
                                    const BlockTable& table, const Batch& batch, const TokenRows& k,
                                    const TokenRows& v) {
  const KvCacheConfig& c = view.config;
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> token_at;
  for (std::int64_t i = 0; i < batch.n(); ++i) {
    const Placement at = testing::placement(c, table, batch.slots[i], batch.positions[i]);
    token_at[{at.block, at.row}] = i;
  }
  const auto parts = testing::parts_of(view);
  const TensorView& grid = view.k;  // [blocks, heads, block_rows, ...]
  for (std::int64_t block = 0; block < grid.shape[0]; ++block) {
    for (std::int64_t head = 0; head < c.n_kv_heads; ++head) {
      for (std::int64_t row = 0; row < grid.shape[2]; ++row) {
        const auto token = token_at.find({block, row});
        if (token != token_at.end()) {
          SCOPED_TRACE("token " + std::to_string(token->second) + " head " + std::to_string(head));
          const Placement at{block, row};
          testing::expect_stored_row(c, c.k_format, view.k, view.k_norms, at, head,
                                     k.row(token->second, head));
          testing::expect_stored_row(c, c.v_format, view.v, view.v_norms, at, head,
                                     v.row(token->second, head));
          continue;
        }
        for (std::size_t p = 0; p < parts.size(); ++p) {
          const TensorView& part = parts[p].second;
          if (!part.present()) continue;
          const std::uint8_t* now = testing::row_bytes_at(part, block, head, row);
          const std::uint8_t* was =
              before[p].data() + (now - static_cast<std::uint8_t*>(part.data));
          const std::size_t bytes =
              static_cast<std::size_t>(part.shape[3]) * dtype_bytes(part.dtype);
          ASSERT_EQ(0, std::memcmp(now, was, bytes)) << parts[p].first << " changed in block "
                                                     << block << " head " << head << " row " << row;
        }
      }
    }
  }
}

// Every format on each side (a covering set of pairs) × contiguous and every page size ×
// linear and ring, with D and the input dtypes varying from case to case.
TEST(AppendKv, WritesOnlyItsRowsForEveryFormatAndLayout) {
  const std::pair<RowFormat, RowFormat> formats[] = {
      {RowFormat::f16, RowFormat::tq8}, {RowFormat::f16, RowFormat::tq3},
      {RowFormat::f16, RowFormat::tq4}, {RowFormat::f16, RowFormat::tq5},
      {RowFormat::f16, RowFormat::tq6}, {RowFormat::f16, RowFormat::fp8},
      {RowFormat::fp8, RowFormat::fp8}, {RowFormat::fp8, RowFormat::tq4},
      {RowFormat::tq8, RowFormat::tq8}, {RowFormat::tq4, RowFormat::f16},
      {RowFormat::tq3, RowFormat::tq6}, {RowFormat::tq5, RowFormat::fp8},
      {RowFormat::tq6, RowFormat::tq5}, {RowFormat::f16, RowFormat::f16}};
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  int variant = 0;
  for (const auto& [k_format, v_format] : formats) {
    for (int page_size : {0, 16, 32, 64, 128}) {
      for (LayerKind kind : {LayerKind::linear, LayerKind::ring}) {
        const CacheCase cc{variant % 2 ? 512 : 256, k_format, v_format, kind, page_size};
        const DType k_dtype = dtypes[variant % 3], v_dtype = dtypes[(variant + 1) % 3];
        ++variant;
        const std::uint64_t seed = testing::fresh_seed();
        SCOPED_TRACE("seed " + std::to_string(seed) + " " + label(cc) + " k " +
                     dtype_name(k_dtype) + " v " + dtype_name(v_dtype));
        std::mt19937_64 rng(seed);
        const KvCacheConfig c = config_of(cc);
        KvCache cache(c);
        BlockTable table = page_size ? testing::shuffled_table(c, rng, false) : BlockTable{};
        const KvCacheView view = page_size ? cache.view(table.view()) : cache.view();
        testing::scramble(view, seed);
        const auto before = testing::snapshot(view);
        Batch batch = random_batch(c, table, 6, rng);
        const TokenRows k =
            testing::token_rows(batch.n(), c.n_kv_heads, c.head_dim, k_dtype, seed + 2);
        const TokenRows v =
            testing::token_rows(batch.n(), c.n_kv_heads, c.head_dim, v_dtype, seed + 3);
        append_kv(view, k.view, v.view, batch.slot_view(), batch.position_view());
        expect_only_batch_rows_written(view, before, table, batch, k, v);
      }
    }
  }
}

// One token at a time over three laps of a ring whose capacity is not a whole number of pages:
// every logical row ends up holding the newest position p with p mod capacity = row, in the
// page the table names.
TEST(AppendKv, RingWrapsAcrossPages) {
  for (int page_size : {0, 16, 64}) {
    const std::uint64_t seed = testing::fresh_seed();
    const CacheCase cc{256, RowFormat::f16, RowFormat::tq5, LayerKind::ring, page_size};
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + label(cc));
    std::mt19937_64 rng(seed);
    const KvCacheConfig c = config_of(cc);
    KvCache cache(c);
    BlockTable table = page_size ? testing::shuffled_table(c, rng, false) : BlockTable{};
    const KvCacheView view = page_size ? cache.view(table.view()) : cache.view();
    const auto last_position = static_cast<std::int32_t>(3 * c.capacity + 2);
    std::vector<TokenRows> written;
    for (std::int32_t p = 0; p <= last_position; ++p) {
      Batch batch{{1}, {p}};
      written.push_back(testing::token_rows(1, c.n_kv_heads, c.head_dim, DType::f32, seed + p));
      append_kv(view, written.back().view, written.back().view, batch.slot_view(),
                batch.position_view());
    }
    for (std::int64_t logical = 0; logical < c.capacity; ++logical) {
      std::int64_t newest = logical;
      while (newest + c.capacity <= last_position) newest += c.capacity;
      SCOPED_TRACE("logical row " + std::to_string(logical) + " position " +
                   std::to_string(newest));
      const Placement at = testing::placement(c, table, 1, newest);
      for (std::int64_t head = 0; head < c.n_kv_heads; ++head) {
        const std::vector<double> x = written[static_cast<std::size_t>(newest)].row(0, head);
        testing::expect_stored_row(c, c.k_format, view.k, {}, at, head, x);
        testing::expect_stored_row(c, c.v_format, view.v, view.v_norms, at, head, x);
      }
    }
  }
}

// Slots sharing their first page (prefix sharing): a token appended through one slot writes the
// shared page, and only the named row of it; every slot's table then reads it.
TEST(AppendKv, SharedPagesTakeWritesFromAnySlot) {
  for (LayerKind kind : {LayerKind::linear, LayerKind::ring}) {
    const std::uint64_t seed = testing::fresh_seed();
    const CacheCase cc{256, RowFormat::fp8, RowFormat::tq3, kind, 16};
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + label(cc));
    std::mt19937_64 rng(seed);
    const KvCacheConfig c = config_of(cc);
    KvCache cache(c);
    BlockTable table = testing::shuffled_table(c, rng, true);
    const KvCacheView view = cache.view(table.view());
    testing::scramble(view, seed);
    const auto before = testing::snapshot(view);
    // Rows 3 and 9 of the shared page through slots 2 and 0; rows of their own pages too.
    const std::int32_t lap = kind == LayerKind::ring ? static_cast<std::int32_t>(c.capacity) : 0;
    Batch batch{{2, 0, 1, 2}, {3 + lap, 9, 20, 37}};
    const TokenRows k =
        testing::token_rows(batch.n(), c.n_kv_heads, c.head_dim, DType::bf16, seed + 1);
    const TokenRows v =
        testing::token_rows(batch.n(), c.n_kv_heads, c.head_dim, DType::f32, seed + 2);
    append_kv(view, k.view, v.view, batch.slot_view(), batch.position_view());
    expect_only_batch_rows_written(view, before, table, batch, k, v);
    for (std::int32_t slot = 0; slot < c.slots; ++slot) {
      EXPECT_EQ(testing::placement(c, table, slot, 3), testing::placement(c, table, 2, 3 + lap));
    }
  }
}

}  // namespace
}  // namespace turbodecode
