// KV cache layout and append_kv, CPU backend (SPEC §1.3, §7): sizes, rows written (and only
// those), ring addressing, rejection of bad batches with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/f16.h"
#include "reference/tq_oracle.h"
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

// The four storage views of a cache, with names for messages.
std::vector<std::pair<std::string, TensorView>> parts_of(const KvCacheView& v) {
  return {{"k", v.k}, {"k_norms", v.k_norms}, {"v", v.v}, {"v_norms", v.v_norms}};
}

// Every byte of the cache's storage, part by part.
std::vector<std::vector<std::uint8_t>> snapshot(const KvCacheView& view) {
  std::vector<std::vector<std::uint8_t>> bytes;
  for (const auto& [name, part] : parts_of(view)) {
    const auto* begin = static_cast<const std::uint8_t*>(part.data);
    bytes.emplace_back(begin, begin + (part.present() ? part.span_bytes() : 0));
  }
  return bytes;
}

// Random bytes everywhere, so that "unchanged" cannot be mistaken for "still zero".
void scramble(const KvCacheView& view, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const auto& [name, part] : parts_of(view)) {
    auto* bytes = static_cast<std::uint8_t*>(part.data);
    for (std::int64_t i = 0; part.present() && i < part.span_bytes(); ++i) {
      bytes[i] = static_cast<std::uint8_t>(rng());
    }
  }
}

// Tokens' rows [n, n_kv_heads, D] stored in `dtype`, and the values the library sees.
struct TokenRows {
  std::vector<std::uint8_t> storage;
  TensorView view;
  std::vector<double> widened;
};

TokenRows token_rows(std::int64_t n, int heads, int head_dim, DType dtype, std::uint64_t seed) {
  const std::vector<float> values =
      testing::gaussian(static_cast<std::size_t>(n * heads * head_dim), seed, 2.0f);
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

// `n` tokens naming distinct (slot, row) pairs; ring positions are drawn over several laps.
Batch random_batch(const KvCacheConfig& c, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> cells(static_cast<std::size_t>(c.slots * c.capacity));
  for (std::size_t i = 0; i < cells.size(); ++i) cells[i] = static_cast<std::int64_t>(i);
  std::shuffle(cells.begin(), cells.end(), rng);
  Batch batch;
  for (int i = 0; i < n; ++i) {
    const std::int64_t lap = c.kind == LayerKind::ring ? static_cast<std::int64_t>(rng() % 4) : 0;
    batch.slots.push_back(static_cast<std::int32_t>(cells[i] / c.capacity));
    batch.positions.push_back(static_cast<std::int32_t>(cells[i] % c.capacity + lap * c.capacity));
  }
  return batch;
}

const std::uint8_t* row_bytes_at(const TensorView& part, std::int64_t slot, std::int64_t head,
                                 std::int64_t row) {
  return static_cast<const std::uint8_t*>(part.data) +
         (slot * part.strides[0] + head * part.strides[1] + row * part.strides[2]) *
             static_cast<std::int64_t>(dtype_bytes(part.dtype));
}

// One stored row (and its norms) against what the oracle says the input row becomes.
void expect_stored_row(const KvCacheConfig& c, RowFormat format, const TensorView& rows,
                       const TensorView& norms, std::int64_t slot, std::int64_t head,
                       std::int64_t row, const std::vector<double>& x) {
  const int d = c.head_dim;
  if (format == RowFormat::f16) {
    const auto* stored =
        reinterpret_cast<const std::uint16_t*>(row_bytes_at(rows, slot, head, row));
    for (int j = 0; j < d; ++j) {
      ASSERT_EQ(stored[j], f32_to_f16(static_cast<float>(x[j]))) << "f16 element " << j;
    }
    return;
  }
  const int bits = format_bits(format);
  const auto want = oracle::tq_encode(d, bits, c.scale_factor_d512, x);
  const auto got = oracle::tq_unpack_codes(d, bits, row_bytes_at(rows, slot, head, row));
  const auto* got_norms = reinterpret_cast<const float*>(row_bytes_at(norms, slot, head, row));
  for (int b = 0; b < norms_per_row(d); ++b) {
    ASSERT_NEAR(got_norms[b], want.norms[b], 1e-6 * want.norms[b]) << "norm " << b;
  }
  for (int j = 0; j < d; ++j) {
    const bool near_boundary =
        oracle::tq_boundary_distance(bits, want.scaled[j]) <= oracle::kTqBoundaryTolerance;
    ASSERT_TRUE(got[j] == want.codes[j] || (near_boundary && std::abs(got[j] - want.codes[j]) == 1))
        << "code " << j << ": " << got[j] << " vs oracle " << want.codes[j];
  }
}

std::int64_t row_of(const KvCacheConfig& c, std::int64_t position) {
  return c.kind == LayerKind::ring ? position % c.capacity : position;
}

// Every row either holds its token's K and V, or kept its bytes from `before`.
void expect_only_batch_rows_written(const KvCache& cache,
                                    const std::vector<std::vector<std::uint8_t>>& before,
                                    const Batch& batch, const TokenRows& k, const TokenRows& v) {
  const KvCacheConfig& c = cache.config();
  const KvCacheView& view = cache.view();
  const auto parts = parts_of(view);
  for (std::int64_t slot = 0; slot < c.slots; ++slot) {
    for (std::int64_t head = 0; head < c.n_kv_heads; ++head) {
      for (std::int64_t row = 0; row < c.capacity; ++row) {
        SCOPED_TRACE("slot " + std::to_string(slot) + " head " + std::to_string(head) + " row " +
                     std::to_string(row));
        std::int64_t token = -1;
        for (std::int64_t i = 0; i < batch.n(); ++i) {
          if (batch.slots[i] == slot && row_of(c, batch.positions[i]) == row) token = i;
        }
        if (token >= 0) {
          const std::size_t at =
              static_cast<std::size_t>((token * c.n_kv_heads + head) * c.head_dim);
          const std::vector<double> k_row(k.widened.begin() + at,
                                          k.widened.begin() + at + c.head_dim);
          const std::vector<double> v_row(v.widened.begin() + at,
                                          v.widened.begin() + at + c.head_dim);
          expect_stored_row(c, c.k_format, view.k, view.k_norms, slot, head, row, k_row);
          expect_stored_row(c, c.v_format, view.v, view.v_norms, slot, head, row, v_row);
          continue;
        }
        for (std::size_t p = 0; p < parts.size(); ++p) {
          const TensorView& part = parts[p].second;
          if (!part.present()) continue;
          const std::uint8_t* now = row_bytes_at(part, slot, head, row);
          const std::uint8_t* was =
              before[p].data() + (now - static_cast<std::uint8_t*>(part.data));
          const std::size_t bytes =
              static_cast<std::size_t>(part.shape[3]) * dtype_bytes(part.dtype);
          ASSERT_EQ(0, std::memcmp(now, was, bytes)) << parts[p].first << " row changed";
        }
      }
    }
  }
}

TEST(KvCache, BytesPerPositionMatchesSpec) {
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::f16, RowFormat::f16)), 1024);
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::f16, RowFormat::tq8)), 772);
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::tq8, RowFormat::tq8)), 520);
  EXPECT_EQ(bytes_per_position(config_of(256, RowFormat::f16, RowFormat::tq4)), 644);
  EXPECT_EQ(bytes_per_position(config_of(512, RowFormat::f16, RowFormat::tq8)), 1024 + 512 + 8);
  EXPECT_EQ(bytes_per_position(config_of(512, RowFormat::tq4, RowFormat::tq6)), 256 + 8 + 384 + 8);
}

TEST(KvCache, ViewsHaveDocumentedShapesAndStartZeroed) {
  for (int d : {256, 512}) {
    const KvCacheConfig c = config_of(d, RowFormat::tq5, RowFormat::tq4, LayerKind::ring);
    const KvCache cache(c);
    const KvCacheView& v = cache.view();
    EXPECT_EQ(v.k.dtype, DType::u8);
    EXPECT_EQ(v.k.shape, (std::array<std::int64_t, 4>{3, 2, 5, d * 5 / 8}));
    EXPECT_EQ(v.v.shape, (std::array<std::int64_t, 4>{3, 2, 5, d / 2}));
    EXPECT_EQ(v.v_norms.shape, (std::array<std::int64_t, 4>{3, 2, 5, d / 256}));
    EXPECT_EQ(v.k_norms.dtype, DType::f32);
    EXPECT_GE(cache.bytes(), 3 * 2 * 5 * bytes_per_position(c));
    for (const auto& part : snapshot(v)) {
      EXPECT_TRUE(std::all_of(part.begin(), part.end(), [](std::uint8_t b) { return b == 0; }));
    }
    const KvCache hybrid(config_of(d, RowFormat::f16, RowFormat::tq8));
    EXPECT_EQ(hybrid.view().k.dtype, DType::f16);
    EXPECT_EQ(hybrid.view().k.shape, (std::array<std::int64_t, 4>{3, 2, 5, d}));
    EXPECT_FALSE(hybrid.view().k_norms.present());
  }
}

TEST(KvCache, AppendWritesOnlyItsRowsForEveryVariant) {
  const std::pair<RowFormat, RowFormat> formats[] = {
      {RowFormat::f16, RowFormat::tq8}, {RowFormat::f16, RowFormat::tq6},
      {RowFormat::f16, RowFormat::tq5}, {RowFormat::f16, RowFormat::tq4},
      {RowFormat::tq8, RowFormat::tq8}, {RowFormat::tq4, RowFormat::f16},
      {RowFormat::f16, RowFormat::f16}};
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  int variant = 0;
  for (int d : {256, 512}) {
    for (LayerKind kind : {LayerKind::linear, LayerKind::ring}) {
      for (const auto& [k_format, v_format] : formats) {
        const std::uint64_t seed = testing::fresh_seed();
        KvCacheConfig c = config_of(d, k_format, v_format, kind);
        c.scale_factor_d512 = d == 512 && kind == LayerKind::ring ? 1.5f : 1.0f;
        const DType k_dtype = dtypes[variant % 3], v_dtype = dtypes[(variant + 1) % 3];
        ++variant;
        SCOPED_TRACE("seed " + std::to_string(seed) + " D " + std::to_string(d) + " K " +
                     format_name(k_format) + " V " + format_name(v_format) +
                     (kind == LayerKind::ring ? " ring" : " linear") + " k " + dtype_name(k_dtype) +
                     " v " + dtype_name(v_dtype));
        KvCache cache(c);
        scramble(cache.view(), seed);
        const auto before = snapshot(cache.view());
        Batch batch = random_batch(c, 6, seed + 1);
        const TokenRows k = token_rows(batch.n(), c.n_kv_heads, d, k_dtype, seed + 2);
        const TokenRows v = token_rows(batch.n(), c.n_kv_heads, d, v_dtype, seed + 3);
        append_kv(cache.view(), k.view, v.view, batch.slot_view(), batch.position_view());
        expect_only_batch_rows_written(cache, before, batch, k, v);
      }
    }
  }
}

TEST(KvCache, RingStoresPositionModuloCapacity) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const KvCacheConfig c = config_of(256, RowFormat::f16, RowFormat::tq8, LayerKind::ring);
  KvCache cache(c);
  const std::int32_t last_position = 3 * static_cast<std::int32_t>(c.capacity) + 2;
  std::vector<TokenRows> written;
  for (std::int32_t p = 0; p <= last_position; ++p) {
    Batch batch{{1}, {p}};
    written.push_back(token_rows(1, c.n_kv_heads, c.head_dim, DType::f32, seed + p));
    append_kv(cache.view(), written.back().view, written.back().view, batch.slot_view(),
              batch.position_view());
  }
  // Row r holds the newest position p with p mod capacity = r.
  for (std::int64_t row = 0; row < c.capacity; ++row) {
    std::int64_t newest = row;
    while (newest + c.capacity <= last_position) newest += c.capacity;
    SCOPED_TRACE("row " + std::to_string(row) + " position " + std::to_string(newest));
    for (std::int64_t head = 0; head < c.n_kv_heads; ++head) {
      const auto& x = written[static_cast<std::size_t>(newest)].widened;
      const std::vector<double> row_values(x.begin() + head * c.head_dim,
                                           x.begin() + (head + 1) * c.head_dim);
      expect_stored_row(c, c.k_format, cache.view().k, {}, 1, head, row, row_values);
      expect_stored_row(c, c.v_format, cache.view().v, cache.view().v_norms, 1, head, row,
                        row_values);
    }
  }
}

// A valid append of two tokens over a scrambled cache; each bad-input case breaks one rule.
struct AppendCall {
  KvCacheConfig config = config_of(256, RowFormat::f16, RowFormat::tq8);
  KvCache cache{config};
  KvCacheView view = cache.view();
  TokenRows k = token_rows(2, 2, 256, DType::f32, 11);
  TokenRows v = token_rows(2, 2, 256, DType::bf16, 12);
  Batch batch{{0, 2}, {1, 4}};
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
                            const std::string& rule_mentions = "") {
  SCOPED_TRACE("expected rejection of '" + argument + "'");
  AppendCall call;
  scramble(call.cache.view(), 5);
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
      "same (slot, row)");
  // In a ring, p and p + capacity name the same row.
  expect_append_rejected(
      "positions",
      [](AppendCall& a) {
        a.config.kind = LayerKind::ring;
        a.view.config.kind = LayerKind::ring;
        a.batch = {{2, 2}, {1, 6}};
      },
      "same (slot, row)");
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
