// Decode over paged caches (SPEC §1.7) on the CPU backend: bitwise the result over the
// contiguous cache holding the same rows, for every page size, shuffled block tables, a page
// shared between slots and ring windows that wrap across pages; and the block table checks.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cache_contents.h"
#include "cpu_decode_call.h"
#include "test_support.h"
#include "turbodecode/attention.h"
#include "turbodecode/error.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode {
namespace {

using testing::BlockTable;
using testing::DecodeCall;
using testing::fill_random;
using testing::fresh_seed;

// A contiguous cache whose slot s holds, at every logical row, the row the paged cache keeps
// for s there (through the block table).
KvCache contiguous_copy(const KvCacheView& paged, const BlockTable& table) {
  KvCacheConfig config = paged.config;
  config.page_size = 0;
  config.pages = 0;
  KvCache flat(config);
  const auto paged_parts = testing::parts_of(paged);
  const auto flat_parts = testing::parts_of(flat.view());
  for (std::size_t p = 0; p < paged_parts.size(); ++p) {
    const TensorView& from = paged_parts[p].second;
    const TensorView& to = flat_parts[p].second;
    if (!from.present()) continue;
    const std::int64_t element_bytes = dtype_bytes(from.dtype);
    const auto row_bytes = static_cast<std::size_t>(from.shape[3] * element_bytes);
    for (std::int64_t slot = 0; slot < config.slots; ++slot) {
      for (std::int64_t head = 0; head < config.n_kv_heads; ++head) {
        for (std::int64_t row = 0; row < config.capacity; ++row) {
          const testing::Placement at = testing::placement(paged.config, table, slot, row);
          auto* into =
              static_cast<std::uint8_t*>(to.data) +
              (slot * to.strides[0] + head * to.strides[1] + row * to.strides[2]) * element_bytes;
          std::memcpy(into, testing::row_bytes_at(from, at.block, head, at.row), row_bytes);
        }
      }
    }
  }
  return flat;
}

struct PagedCase {
  KvCacheConfig config;
  DecodeOptions options;
  std::vector<std::int32_t> slots, positions;

  std::string describe() const {
    std::string s = std::string("page=") + std::to_string(config.page_size) +
                    " kind=" + (config.kind == LayerKind::ring ? "ring" : "linear") +
                    " D=" + std::to_string(config.head_dim) + " K=" + format_name(config.k_format) +
                    " V=" + format_name(config.v_format) +
                    " query_tokens=" + std::to_string(options.query_tokens) +
                    " chunk=" + std::to_string(options.fixed_chunk_positions) + " pos=";
    for (auto p : positions) s += std::to_string(p) + ",";
    return s;
  }
};

// Every page size × linear and ring; the format pairs, head dims, runs and chunk sizes rotate.
// Linear capacities end mid-page; ring windows wrap across pages (and across the ring's end).
std::vector<PagedCase> paged_cases() {
  const RowFormat k_formats[] = {RowFormat::f16, RowFormat::fp8, RowFormat::tq4, RowFormat::tq8};
  const RowFormat v_formats[] = {RowFormat::f16, RowFormat::fp8, RowFormat::tq3, RowFormat::tq4,
                                 RowFormat::tq5, RowFormat::tq6, RowFormat::tq8};
  std::vector<PagedCase> cases;
  int rotation = 0;
  for (int page_size : kPageSizes) {
    for (bool ring : {false, true}) {
      PagedCase c;
      c.config.slots = 3;
      c.config.n_kv_heads = 2;
      c.config.capacity = ring ? 300 : 700;
      c.config.head_dim = rotation % 2 ? 512 : 256;
      c.config.kind = ring ? LayerKind::ring : LayerKind::linear;
      c.config.k_format = k_formats[rotation % std::size(k_formats)];
      c.config.v_format = v_formats[rotation % std::size(v_formats)];
      c.config.page_size = page_size;
      c.config.pages = c.config.slots * pages_per_slot(c.config) + 2;  // two never named
      c.options.n_heads = 4;
      c.options.mask = ring ? MaskKind::sliding_ring : MaskKind::causal;
      c.options.sliding_window = ring ? 170 : 0;
      c.options.query_tokens = rotation % 3 == 2 ? 1 : 3;
      c.options.fixed_chunk_positions = rotation % 2 ? 0 : 32;
      const std::array<std::int32_t, 3> starts =
          ring ? std::array{1000, 290, 40} : std::array{0, 500, 690};
      for (std::int32_t slot = 0; slot < 3; ++slot) {
        for (int t = 0; t < c.options.query_tokens; ++t) {
          c.slots.push_back(slot);
          c.positions.push_back(starts[static_cast<std::size_t>(slot)] + t);
        }
      }
      cases.push_back(c);
      ++rotation;
    }
  }
  return cases;
}

TEST(DecodePaged, EqualsTheContiguousCacheBitwise) {
  for (const PagedCase& c : paged_cases()) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(c.describe() + " seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    BlockTable table = testing::shuffled_table(c.config, rng, /*shared_prefix=*/true);
    KvCache storage(c.config);
    const KvCacheView paged = storage.view(table.view());
    fill_random(paged, seed + 1);
    const KvCache flat = contiguous_copy(paged, table);
    const auto n = static_cast<std::int64_t>(c.slots.size());
    const DecodePlan paged_plan = plan_decode(c.config, c.options, n);
    const DecodePlan flat_plan = plan_decode(flat.config(), c.options, n);
    const DecodeCall from_pages(paged_plan, c.slots, c.positions, seed + 2);
    DecodeCall from_flat(flat_plan, c.slots, c.positions, seed + 2);
    from_pages.run_with_lse(paged_plan, paged);
    from_flat.run_with_lse(flat_plan, flat.view());
    for (std::int64_t i = 0; i < n; ++i) {
      SCOPED_TRACE("row " + std::to_string(i));
      EXPECT_EQ(from_pages.output(i), from_flat.output(i));
      EXPECT_EQ(from_pages.lse_values(i), from_flat.lse_values(i));
      for (float x : from_pages.output(i)) ASSERT_TRUE(std::isfinite(x));
    }
  }
}

// Entries of pages the queries read must name one of the cache's pages; entries of pages no
// query reads may hold anything. A ring window that wraps reads the pages at both ends.
TEST(DecodePaged, ChecksTheBlockTableEntriesTheQueriesRead) {
  struct Check {
    LayerKind kind;
    std::int64_t capacity, window;
    std::vector<std::int32_t> positions;
    std::vector<std::pair<std::int64_t, std::int64_t>> unread, read;  // (slot, page index)
  };
  const Check checks[] = {
      // Slot 0 reads pages 0-2, slot 1 pages 0-6.
      {LayerKind::linear, 256, 0, {40, 100}, {{0, 9}, {1, 15}}, {{0, 2}, {1, 6}, {1, 0}}},
      // Slot 0 reads rows 31-63 and 0-6 of its ring (pages 1-3 and 0), slot 1 rows 0-20.
      {LayerKind::ring, 64, 40, {70, 20}, {{1, 2}, {1, 3}}, {{0, 0}, {0, 3}, {1, 1}}}};
  for (const Check& check : checks) {
    SCOPED_TRACE(check.kind == LayerKind::ring ? "ring" : "linear");
    KvCacheConfig config{
        2, 1, check.capacity, 256, check.kind, RowFormat::f16, RowFormat::tq8, 1.0f, Device::cpu};
    config.page_size = 16;
    config.pages = 32;
    std::mt19937_64 rng(fresh_seed());
    BlockTable table = testing::shuffled_table(config, rng, false);
    KvCache storage(config);
    const KvCacheView cache = storage.view(table.view());
    fill_random(cache, fresh_seed());
    DecodeOptions options;
    options.n_heads = 2;
    options.mask = check.kind == LayerKind::ring ? MaskKind::sliding_ring : MaskKind::causal;
    options.sliding_window = check.window;
    const DecodePlan plan = plan_decode(config, options, 2);
    const auto entry = [&](std::pair<std::int64_t, std::int64_t> at) -> std::int32_t& {
      return table.entries[static_cast<std::size_t>(at.first * table.per_slot + at.second)];
    };
    for (const auto& unread : check.unread) entry(unread) = -1;
    const DecodeCall call(plan, {0, 1}, check.positions, fresh_seed());
    EXPECT_NO_THROW(call.run(plan, cache));

    const DecodeCall untouched(plan, {0, 1}, check.positions, fresh_seed());
    for (const auto& read : check.read) {
      for (std::int32_t bad : {-1, 32}) {
        SCOPED_TRACE("entry [" + std::to_string(read.first) + "][" + std::to_string(read.second) +
                     "] = " + std::to_string(bad));
        const std::int32_t kept = entry(read);
        entry(read) = bad;
        try {
          untouched.run(plan, cache);
          ADD_FAILURE() << "no exception";
        } catch (const InvalidArgument& e) {
          EXPECT_EQ(e.argument(), "cache.block_table") << e.what();
        }
        EXPECT_TRUE(untouched.out_untouched());
        entry(read) = kept;
      }
    }
  }
}

}  // namespace
}  // namespace turbodecode
