// KV cache configuration and layout, CPU backend (SPEC §1.3, §1.5, §1.7, §7): sizes, storage
// views of contiguous and paged caches, and append_kv's rejection of bad batches, block tables
// and views with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cache_contents.h"
#include "test_support.h"
#include "turbodecode/error.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode {
namespace {

KvCacheConfig config_of(int head_dim, RowFormat k_format, RowFormat v_format,
                        LayerKind kind = LayerKind::linear) {
  KvCacheConfig c;
  c.slots = 3;
  c.n_kv_heads = 2;
  c.capacity = 5;
  c.head_dim = head_dim;
  c.kind = kind;
  c.k_format = k_format;
  c.v_format = v_format;
  return c;
}

KvCacheConfig paged(KvCacheConfig c, int page_size, std::int64_t pages) {
  c.page_size = page_size;
  c.pages = pages;
  return c;
}

using testing::Batch;
using testing::BlockTable;
using testing::snapshot;
using testing::token_rows;
using testing::TokenRows;

TEST(KvCache, BytesPerPositionMatchesSpec) {
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::f16, RowFormat::f16)), 1024);
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::f16, RowFormat::tq8)), 772);
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::tq8, RowFormat::tq8)), 520);
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::f16, RowFormat::tq4)), 644);
  EXPECT_EQ(bytes_per_position(config_of(512, RowFormat::f16, RowFormat::tq8)), 1024 + 512 + 8);
  EXPECT_EQ(bytes_per_position(config_of(512, RowFormat::tq4, RowFormat::tq6)), 256 + 8 + 384 + 8);
  // SPEC §1.5, §1.6 at D = 256: tq3 100 B, tq4 132, tq5 164, tq6 196, tq8 260; fp8 260.
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::tq3, RowFormat::tq5)), 100 + 164);
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::fp8, RowFormat::tq6)), 260 + 196);
  EXPECT_EQ(bytes_per_position(config_of(512, RowFormat::fp8, RowFormat::fp8)), 2 * (512 + 4));
  // Paging changes where rows live, not their size.
  EXPECT_EQ(bytes_per_position(paged(config_of(256, RowFormat::tq3, RowFormat::fp8), 16, 4)),
            100 + 260);
}

TEST(KvCache, ContiguousViewsHaveDocumentedShapesAndStartZeroed) {
  for (int d : {256, 512}) {
    const KvCacheConfig c = config_of(d, RowFormat::tq5, RowFormat::tq4, LayerKind::ring);
    const KvCache cache(c);
    const KvCacheView& v = cache.view();
    EXPECT_EQ(v.k.dtype, DType::u8);
    EXPECT_EQ(v.k.shape, (std::array<std::int64_t, 4>{3, 2, 5, d * 5 / 8}));
    EXPECT_EQ(v.v.shape, (std::array<std::int64_t, 4>{3, 2, 5, d / 2}));
    EXPECT_EQ(v.v_norms.shape, (std::array<std::int64_t, 4>{3, 2, 5, d / 256}));
    EXPECT_EQ(v.k_norms.dtype, DType::f32);
    EXPECT_FALSE(v.block_table.present());
    EXPECT_EQ(pages_per_slot(c), 0);
    EXPECT_GE(cache.bytes(), 3 * 2 * 5 * bytes_per_position(c));
    for (const auto& part : snapshot(v)) {
      EXPECT_TRUE(std::all_of(part.begin(), part.end(), [](std::uint8_t b) { return b == 0; }));
    }
    const KvCache hybrid(config_of(d, RowFormat::f16, RowFormat::tq8));
    EXPECT_EQ(hybrid.view().k.dtype, DType::f16);
    EXPECT_EQ(hybrid.view().k.shape, (std::array<std::int64_t, 4>{3, 2, 5, d}));
    EXPECT_FALSE(hybrid.view().k_norms.present());
    const KvCache fp8(config_of(d, RowFormat::fp8, RowFormat::tq3));
    EXPECT_EQ(fp8.view().k.shape, (std::array<std::int64_t, 4>{3, 2, 5, d}));
    EXPECT_EQ(fp8.view().k_norms.shape, (std::array<std::int64_t, 4>{3, 2, 5, 1}));
    EXPECT_EQ(fp8.view().v.shape, (std::array<std::int64_t, 4>{3, 2, 5, d * 3 / 8}));
  }
}

// Paged storage is [pages, n_kv_heads, page_size, row] per part; the table is the caller's,
// paired with the storage by view(block_table).
TEST(KvCache, PagedViewsHaveDocumentedShapes) {
  for (int page_size : kPageSizes) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    KvCacheConfig c = paged(config_of(512, RowFormat::fp8, RowFormat::tq6), page_size, 7);
    c.capacity = 2 * page_size + 1;
    EXPECT_EQ(pages_per_slot(c), 3);
    const KvCache cache(c);
    const KvCacheView& v = cache.view();
    EXPECT_EQ(v.k.shape, (std::array<std::int64_t, 4>{7, 2, page_size, 512}));
    EXPECT_EQ(v.k_norms.shape, (std::array<std::int64_t, 4>{7, 2, page_size, 1}));
    EXPECT_EQ(v.v.shape, (std::array<std::int64_t, 4>{7, 2, page_size, 384}));
    EXPECT_EQ(v.v_norms.shape, (std::array<std::int64_t, 4>{7, 2, page_size, 2}));
    EXPECT_GE(cache.bytes(), 7 * 2 * page_size * bytes_per_position(c));
    EXPECT_FALSE(v.block_table.present());
    std::vector<std::int32_t> table(3 * 3, 0);
    const TensorView table_view = TensorView::contiguous(table.data(), DType::i32, {3, 3});
    const KvCacheView with_table = cache.view(table_view);
    EXPECT_EQ(with_table.block_table.data, table.data());
    EXPECT_EQ(with_table.k.data, v.k.data);
    EXPECT_EQ(with_table.v_norms.data, v.v_norms.data);
  }
}

// A valid append of two tokens over a scrambled cache; each bad-input case breaks one rule.
// Contiguous: 3 slots of 5 rows. Paged: 3 slots of 40 rows in pages of 16 (3 per slot), 10
// pages, slot s holding pages 3s + 2, 3s + 1, 3s (page 9 is spare).
struct AppendCall {
  explicit AppendCall(bool paged_cache = false)
      : config(paged_cache ? paged_config() : config_of(256, RowFormat::f16, RowFormat::tq8)),
        cache(config),
        table(paged_cache ? BlockTable{{2, 1, 0, 5, 4, 3, 8, 7, 6}, 3} : BlockTable{}),
        view(paged_cache ? cache.view(table.view()) : cache.view()),
        batch(paged_cache ? Batch{{0, 2}, {1, 35}} : Batch{{0, 2}, {1, 4}}) {}

  static KvCacheConfig paged_config() {
    KvCacheConfig c = paged(config_of(256, RowFormat::fp8, RowFormat::tq5), 16, 10);
    c.capacity = 40;
    return c;
  }

  KvCacheConfig config;
  KvCache cache;
  BlockTable table;
  KvCacheView view;
  TokenRows k = token_rows(2, 2, 256, DType::f32, 11);
  TokenRows v = token_rows(2, 2, 256, DType::bf16, 12);
  Batch batch;
  TensorView slot_ids = batch.slot_view();
  TensorView positions = batch.position_view();
  void run() {
    slot_ids.data = batch.slots.data();  // a mutation may have replaced the batch
    positions.data = batch.positions.data();
    append_kv(view, k.view, v.view, slot_ids, positions);
  }
};

void expect_append_rejected(const std::string& argument,
                            const std::function<void(AppendCall&)>& mutate,
                            const std::string& rule_mentions = "", bool paged_cache = false) {
  SCOPED_TRACE("expected rejection of '" + argument + "'");
  AppendCall call(paged_cache);
  testing::scramble(call.cache.view(), 5);
  const auto before = snapshot(call.cache.view());
  mutate(call);
  try {
    call.run();
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(e.rule().find(rule_mentions), std::string::npos) << e.what();
  }
  EXPECT_TRUE(snapshot(call.cache.view()) == before) << "cache written";
}

TEST(KvCache, AppendAcceptsTheBaseCallOfTheRejectionTests) {
  AppendCall call;
  call.run();
  const auto* norms = call.view.v_norms.as<const float>();
  EXPECT_GT(norms[(0 * 2 + 0) * 5 + 1], 0.0f);  // slot 0, head 0, row 1
  EXPECT_GT(norms[(2 * 2 + 1) * 5 + 4], 0.0f);  // slot 2, head 1, row 4
}

TEST(KvCache, LinearRejectsPositionAtCapacityAndWritesNothing) {
  expect_append_rejected(
      "positions", [](AppendCall& a) { a.batch.positions[1] = 5; }, "capacity");
  expect_append_rejected(
      "positions", [](AppendCall& a) { a.batch.positions[0] = 1 << 30; }, "capacity");
}

TEST(KvCache, TwoTokensForOneRowAreRejected) {
  expect_append_rejected(
      "positions",
      [](AppendCall& a) {
        a.batch = {{1, 1}, {3, 3}};
      },
      "same cache row");
  // In a ring, p and p + capacity name the same row.
  expect_append_rejected(
      "positions",
      [](AppendCall& a) {
        a.config.kind = LayerKind::ring;
        a.view.config.kind = LayerKind::ring;
        a.batch = {{2, 2}, {1, 6}};
      },
      "same cache row");
  AppendCall different_slots;
  different_slots.batch = {{0, 1}, {3, 3}};
  EXPECT_NO_THROW(different_slots.run());
}

TEST(KvCache, AppendRejectsEachBadInputAndWritesNothing) {
  using Mutation = std::function<void(AppendCall&)>;
  const std::vector<std::pair<std::string, Mutation>> cases = {
      {"slot_ids", [](AppendCall& a) { a.batch.slots[1] = 3; }},
      {"slot_ids", [](AppendCall& a) { a.batch.slots[0] = -1; }},
      {"slot_ids", [](AppendCall& a) { a.slot_ids.dtype = DType::f32; }},
      {"slot_ids", [](AppendCall& a) { a.slot_ids.shape[0] = 1; }},
      {"positions", [](AppendCall& a) { a.batch.positions[0] = -2; }},
      {"positions", [](AppendCall& a) { a.positions.rank = 2; }},
      {"k", [](AppendCall& a) { a.k.view.data = nullptr; }},
      {"k", [](AppendCall& a) { a.k.view.dtype = DType::i32; }},
      {"k", [](AppendCall& a) { a.k.view.shape[1] = 1; }},
      {"k", [](AppendCall& a) { a.k.view.shape[2] = 512; }},
      {"k", [](AppendCall& a) { a.k.view.strides[2] = 2; }},
      {"k", [](AppendCall& a) { a.k.view.device = Device::cuda; }},
      {"v", [](AppendCall& a) { a.v.view.shape[0] = 3; }},
      {"v", [](AppendCall& a) { a.v.view.dtype = DType::u8; }},
      {"cache.k", [](AppendCall& a) { a.view.k.dtype = DType::u8; }},
      {"cache.v", [](AppendCall& a) { a.view.v.shape[2] = 4; }},
      {"cache.v_norms", [](AppendCall& a) { a.view.v_norms = {}; }},
      {"cache.k_norms", [](AppendCall& a) { a.view.k_norms = a.view.v_norms; }},
      {"cache.k", [](AppendCall& a) { a.view.config.head_dim = 512; }},
      {"head_dim", [](AppendCall& a) { a.view.config.head_dim = 128; }},
      {"n_kv_heads", [](AppendCall& a) { a.view.config.n_kv_heads = 0; }},
      {"cache.k",
       [](AppendCall& a) {
         a.k.view.data = a.view.k.data;  // the input aliases the cache
       }},
      {"cache.k", [](AppendCall& a) { a.view.v.data = a.view.k.data; }},  // outputs overlap
  };
  for (const auto& [argument, mutate] : cases) expect_append_rejected(argument, mutate);
}

TEST(KvCache, PagedAppendChecksTheTableEntriesItUses) {
  AppendCall base(true);
  EXPECT_NO_THROW(base.run());
  // Entries no token uses are not the append's business.
  AppendCall untouched(true);
  untouched.table.entries[1] = -7;
  untouched.table.entries[5] = 1000;
  EXPECT_NO_THROW(untouched.run());
  const auto rejected = [](const std::string& argument,
                           const std::function<void(AppendCall&)>& mutate,
                           const std::string& rule_mentions = "") {
    expect_append_rejected(argument, mutate, rule_mentions, true);
  };
  rejected(
      "cache.block_table", [](AppendCall& a) { a.table.entries[0] = -1; }, "[0][0] is -1");
  rejected(
      "cache.block_table", [](AppendCall& a) { a.table.entries[8] = 10; }, "[2][2] is 10");
  rejected("cache.block_table", [](AppendCall& a) { a.view.block_table = {}; });
  rejected("cache.block_table", [](AppendCall& a) { a.view.block_table.shape[1] = 2; });
  rejected("cache.block_table", [](AppendCall& a) { a.view.block_table.shape[0] = 4; });
  rejected("cache.block_table", [](AppendCall& a) { a.view.block_table.dtype = DType::f32; });
  rejected("cache.block_table", [](AppendCall& a) { a.view.block_table.strides[1] = 2; });
  rejected("cache.block_table", [](AppendCall& a) { a.view.block_table.device = Device::cuda; });
  rejected("cache.k", [](AppendCall& a) { a.view.k.shape[0] = 9; });
  rejected("cache.v", [](AppendCall& a) { a.view.v.shape[2] = 40; });
  rejected("cache.v_norms", [](AppendCall& a) {
    a.view.block_table.data = a.view.v_norms.data;  // the table aliases the cache
  });
  // Slots 0 and 1 sharing page 2: row 5 of it through either slot is one row.
  rejected(
      "positions",
      [](AppendCall& a) {
        a.table.entries[3] = 2;
        a.batch = {{0, 1}, {5, 5}};
      },
      "same cache row");
  expect_append_rejected(
      "cache.block_table", [](AppendCall& a) { a.view.block_table = a.k.view; },
      "absent for a contiguous cache");
}

TEST(KvCache, ConfigRulesNameTheField) {
  using Mutation = std::function<void(KvCacheConfig&)>;
  const std::vector<std::pair<std::string, Mutation>> cases = {
      {"slots", [](KvCacheConfig& c) { c.slots = 0; }},
      {"n_kv_heads", [](KvCacheConfig& c) { c.n_kv_heads = -1; }},
      {"capacity", [](KvCacheConfig& c) { c.capacity = 0; }},
      {"capacity", [](KvCacheConfig& c) { c.capacity = std::int64_t{1} << 32; }},
      {"head_dim", [](KvCacheConfig& c) { c.head_dim = 384; }},
      {"kind", [](KvCacheConfig& c) { c.kind = static_cast<LayerKind>(7); }},
      {"k_format", [](KvCacheConfig& c) { c.k_format = static_cast<RowFormat>(9); }},
      {"v_format", [](KvCacheConfig& c) { c.v_format = static_cast<RowFormat>(9); }},
      {"scale_factor_d512", [](KvCacheConfig& c) { c.scale_factor_d512 = -1.0f; }},
      {"scale_factor_d512",
       [](KvCacheConfig& c) { c.scale_factor_d512 = std::numeric_limits<float>::infinity(); }},
      {"page_size", [](KvCacheConfig& c) { c = paged(c, 8, 4); }},
      {"page_size", [](KvCacheConfig& c) { c = paged(c, 256, 4); }},
      {"page_size", [](KvCacheConfig& c) { c = paged(c, -16, 4); }},
      {"pages", [](KvCacheConfig& c) { c = paged(c, 16, 0); }},
      {"pages", [](KvCacheConfig& c) { c = paged(c, 0, 4); }},
      {"pages", [](KvCacheConfig& c) { c = paged(c, 64, std::int64_t{1} << 31); }},
  };
  for (const auto& [argument, mutate] : cases) {
    SCOPED_TRACE(argument);
    KvCacheConfig c = config_of(256, RowFormat::f16, RowFormat::tq8);
    mutate(c);
    for (const auto& call : std::vector<std::function<void()>>{[&] { validate_config(c); },
                                                               [&] { bytes_per_position(c); },
                                                               [&] { KvCache cache(c); }}) {
      try {
        call();
        ADD_FAILURE() << "no exception";
      } catch (const InvalidArgument& e) {
        EXPECT_EQ(e.argument(), argument) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace turbodecode
