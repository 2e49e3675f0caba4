// SPEC §7 and §7.1 through the public API, one test per rule and across the operators: each
// bad argument is rejected with an InvalidArgument naming it, and every output stays poisoned.
// The per-operator suites (attention_test, kv_cache_test, tq_codec_test, hc_validation_test)
// go through each operator's arguments in full.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_support.h"
#include "turbodecode/turbodecode.h"

namespace turbodecode {
namespace {

constexpr std::uint8_t kPoison = 0xFF;

// Host memory for one operand, poisoned.
struct Poisoned {
  explicit Poisoned(std::int64_t bytes) : buffer(Device::cpu, bytes) { buffer.fill_bytes(kPoison); }
  TensorView view(DType dtype, std::initializer_list<std::int64_t> shape) const {
    return buffer.view(dtype, shape);
  }
  bool untouched() const {
    for (std::uint8_t b : testing::to_host<std::uint8_t>(buffer)) {
      if (b != kPoison) return false;
    }
    return true;
  }
  Buffer buffer;
};

// Host memory holding random f32 values (inputs); never null, even for no values.
struct Values {
  explicit Values(std::int64_t count, std::uint64_t seed)
      : buffer(testing::to_device(
            Device::cpu,
            testing::gaussian(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)), seed))) {}
  TensorView view(std::initializer_list<std::int64_t> shape) const {
    return buffer.view(DType::f32, shape);
  }
  Buffer buffer;
};

// Expects `call` to throw InvalidArgument naming `argument`, and `outputs` to stay poisoned.
void expect_rejected(const std::string& argument, const std::function<void()>& call,
                     std::initializer_list<const Poisoned*> outputs) {
  SCOPED_TRACE(argument);
  try {
    call();
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
  for (const Poisoned* output : outputs) EXPECT_TRUE(output->untouched()) << "written";
}

KvCacheConfig small_cache(LayerKind kind = LayerKind::linear) {
  KvCacheConfig c;
  c.slots = 2;
  c.n_kv_heads = 1;
  c.capacity = 8;
  c.kind = kind;
  return c;
}

// Two slots of 32 rows in pages of 16 rows: 4 pages, two per slot.
KvCacheConfig small_paged_cache() {
  KvCacheConfig c = small_cache();
  c.capacity = 32;
  c.page_size = 16;
  c.pages = 4;
  return c;
}

// A KvCache whose storage is poisoned, so a rejected append can be seen to write nothing.
struct PoisonedCache {
  explicit PoisonedCache(const KvCacheConfig& c) : cache(c) {
    std::memset(cache.view().k.data, kPoison, static_cast<std::size_t>(cache.bytes()));
  }
  bool untouched() const {
    const auto* bytes = static_cast<const std::uint8_t*>(cache.view().k.data);
    for (std::int64_t i = 0; i < cache.bytes(); ++i) {
      if (bytes[i] != kPoison) return false;
    }
    return true;
  }
  KvCache cache;
};

// An i32 index array in host memory; never null, even for no indices.
Buffer indices(std::vector<std::int32_t> values) {
  if (values.empty()) values.push_back(0);
  return testing::to_device(Device::cpu, values);
}

// The cache's view; a paged one's with the block table `entries` (held in `table`) as [slots,
// entries / slots].
KvCacheView view_of(const KvCache& cache, const Buffer& table,
                    const std::vector<std::int32_t>& entries) {
  const KvCacheConfig& c = cache.config();
  if (c.page_size == 0) return cache.view();
  return cache.view(
      table.view(DType::i32, {c.slots, static_cast<std::int64_t>(entries.size()) / c.slots}));
}

// Appends token i at (slots[i], positions[i]), through `block_table` for a paged cache; returns
// the error's argument, or "" when the call is accepted.
std::string append_error(const PoisonedCache& target, const std::vector<std::int32_t>& slots,
                         const std::vector<std::int32_t>& positions,
                         const std::vector<std::int32_t>& block_table = {}) {
  const auto n = static_cast<std::int64_t>(slots.size());
  const KvCacheConfig& c = target.cache.config();
  const Values k(n * c.n_kv_heads * c.head_dim, 1), v(n * c.n_kv_heads * c.head_dim, 2);
  const Buffer slot_ids = indices(slots), position_ids = indices(positions);
  const Buffer table = indices(block_table);
  const KvCacheView cache = view_of(target.cache, table, block_table);
  try {
    append_kv(cache, k.view({n, c.n_kv_heads, c.head_dim}), v.view({n, c.n_kv_heads, c.head_dim}),
              slot_ids.view(DType::i32, {n}), position_ids.view(DType::i32, {n}));
  } catch (const InvalidArgument& e) {
    return e.argument();
  }
  return "";
}

// One run_decode on a zeroed cache of `config` with poisoned outputs (out and lse).
struct DecodeRun {
  DecodeRun(const KvCacheConfig& config, int n_heads, std::int64_t n, int query_tokens = 1)
      : DecodeRun(config, {.n_heads = n_heads, .query_tokens = query_tokens}, n) {}
  DecodeRun(const KvCacheConfig& config, const DecodeOptions& options, std::int64_t n)
      : cache(config),
        plan(plan_decode(config, options, n)),
        q(n * options.n_heads * config.head_dim, 3),
        out(n * options.n_heads * config.head_dim * 4),
        lse(n * options.n_heads * 4),
        workspace(std::max<std::int64_t>(plan.workspace_bytes, 16)),
        n_(n),
        n_heads_(options.n_heads) {}

  // `block_table` for a paged cache (view_of); `lse_shape` that of lse, which is absent when
  // empty.
  void run(const std::vector<std::int32_t>& slots, const std::vector<std::int32_t>& positions,
           const std::vector<std::int32_t>& block_table = {},
           std::initializer_list<std::int64_t> lse_shape = {}) const {
    launch(slots, positions, block_table, lse_shape, {}, {});
  }

  // A sharded run: shard.begin and shard.end hold `begin` and `end` (absent when empty).
  void run_sharded(const std::vector<std::int32_t>& slots,
                   const std::vector<std::int32_t>& positions,
                   const std::vector<std::int32_t>& begin,
                   const std::vector<std::int32_t>& end) const {
    launch(slots, positions, {}, {}, begin, end);
  }

  KvCache cache;
  DecodePlan plan;
  Values q;
  Poisoned out, lse, workspace;
  std::int64_t n_;
  int n_heads_;

 private:
  void launch(const std::vector<std::int32_t>& slots, const std::vector<std::int32_t>& positions,
              const std::vector<std::int32_t>& block_table,
              std::initializer_list<std::int64_t> lse_shape, const std::vector<std::int32_t>& begin,
              const std::vector<std::int32_t>& end) const {
    const Buffer slot_ids = indices(slots), seq_pos = indices(positions);
    const Buffer table = indices(block_table);
    const Buffer begin_ids = indices(begin), end_ids = indices(end);
    const auto range = [](const Buffer& ids, const std::vector<std::int32_t>& values) {
      return values.empty() ? TensorView{}
                            : ids.view(DType::i32, {static_cast<std::int64_t>(values.size())});
    };
    const int dim = plan.cache.head_dim;
    run_decode(plan, view_of(cache, table, block_table), q.view({n_, n_heads_, dim}),
               slot_ids.view(DType::i32, {n_}), seq_pos.view(DType::i32, {n_}),
               {range(begin_ids, begin), range(end_ids, end)},
               out.view(DType::f32, {n_, n_heads_, dim}),
               lse_shape.size() > 0 ? lse.view(DType::f32, lse_shape) : TensorView{},
               workspace.view(DType::u8, {plan.workspace_bytes}));
  }
};

TEST(InputRules, UnsupportedHeadDimOrBitsIsRejected) {
  const Values x(2 * 256, 1);
  const Poisoned codes(2 * 256), norms(2 * 4);
  const auto encode = [&](CodecParams params) {
    return [&, params] {
      encode_rows(params, x.view({2, 256}), codes.view(DType::u8, {2, 256}),
                  norms.view(DType::f32, {2, 1}));
    };
  };
  expect_rejected("head_dim", encode({.head_dim = 128}), {&codes, &norms});
  expect_rejected("format", encode({.format = RowFormat::f16}), {&codes, &norms});
  expect_rejected("format", encode({.format = static_cast<RowFormat>(9)}), {&codes, &norms});
  KvCacheConfig c = small_cache();
  c.head_dim = 384;
  expect_rejected("head_dim", [&] { plan_decode(c, {.n_heads = 1}, 1); }, {});
  c = small_cache();
  c.v_format = static_cast<RowFormat>(9);
  expect_rejected("v_format", [&] { KvCache cache(c); }, {});
}

TEST(InputRules, HeadsNotAMultipleOfKvHeadsIsRejected) {
  KvCacheConfig c = small_cache();
  c.n_kv_heads = 2;
  expect_rejected("options.n_heads", [&] { plan_decode(c, {.n_heads = 3}, 1); }, {});
}

TEST(InputRules, SlotIdBeyondTheSlotsIsRejected) {
  const PoisonedCache target(small_cache());
  EXPECT_EQ(append_error(target, {2}, {0}), "slot_ids");
  EXPECT_TRUE(target.untouched());
  const DecodeRun decode(small_cache(), 1, 1);
  expect_rejected("slot_ids", [&] { decode.run({2}, {0}); }, {&decode.out});
}

// A paged cache's block table entries name pages, as slot ids name slots (SPEC §1.7).
TEST(InputRules, BlockTableEntryNamingNoPageIsRejected) {
  const PoisonedCache target(small_paged_cache());
  EXPECT_EQ(append_error(target, {1}, {20}, {0, 1, 2, 4}), "cache.block_table");
  EXPECT_EQ(append_error(target, {0}, {3}, {-1, 1, 2, 3}), "cache.block_table");
  EXPECT_TRUE(target.untouched());
  const DecodeRun decode(small_paged_cache(), 1, 1);
  expect_rejected("cache.block_table", [&] { decode.run({1}, {20}, {0, 1, 2, 4}); }, {&decode.out});
  expect_rejected("cache.block_table", [&] { decode.run({0}, {3}, {-1, 1, 2, 3}); }, {&decode.out});
  // Entries no token or query reaches may hold anything.
  EXPECT_EQ(append_error(target, {0}, {3}, {0, -7, 2, 3}), "");
}

// SPEC §2.8: each run of query_tokens rows is one slot's tokens at consecutive positions.
TEST(InputRules, QueryRunsOfOtherSlotsOrPositionsAreRejected) {
  const DecodeRun decode(small_cache(), 1, 2, 2);
  expect_rejected("seq_pos", [&] { decode.run({0, 0}, {3, 5}); }, {&decode.out});
  // A ring holds any position: the run's "one more" is checked without overflowing i32.
  const DecodeRun ring(
      small_cache(LayerKind::ring),
      {.n_heads = 1, .mask = MaskKind::sliding_ring, .sliding_window = 4, .query_tokens = 2}, 2);
  expect_rejected("seq_pos", [&] { ring.run({0, 0}, {INT32_MAX, 0}); }, {&ring.out});
  expect_rejected("slot_ids", [&] { decode.run({0, 1}, {3, 4}); }, {&decode.out});
  expect_rejected("options.query_tokens",
                  [&] {
                    plan_decode(small_cache(LayerKind::ring),
                                {.n_heads = 1, .mask = MaskKind::sliding_ring, .query_tokens = 2},
                                2);
                  },
                  {});
}

TEST(InputRules, PositionBeyondALinearCacheIsRejected) {
  const PoisonedCache target(small_cache());
  EXPECT_EQ(append_error(target, {0, 1}, {7, 8}), "positions");
  EXPECT_TRUE(target.untouched());
  const DecodeRun decode(small_cache(), 1, 1);
  expect_rejected("seq_pos", [&] { decode.run({0}, {8}); }, {&decode.out});
  // A ring holds any position.
  const PoisonedCache ring(small_cache(LayerKind::ring));
  EXPECT_EQ(append_error(ring, {0}, {1000}), "");
}

// A shard's ranges (SPEC §2.10): both arrays or neither, one entry per slot, 0 <= begin <= end
// for each slot a query names; a linear cache holds a query's window from its slot's begin on;
// a closed range ends outside every run.
TEST(InputRules, ShardRangesAreChecked) {
  const DecodeRun decode(small_cache(), 1, 1);
  const std::int32_t open = INT32_MAX;
  const auto rejected = [&](const std::string& argument, std::vector<std::int32_t> begin,
                            std::vector<std::int32_t> end, std::int32_t slot = 0,
                            std::int32_t position = 3) {
    expect_rejected(argument, [&] { decode.run_sharded({slot}, {position}, begin, end); },
                    {&decode.out});
  };
  rejected("shard", {0, 0}, {});
  rejected("shard.begin", {0}, {open});
  rejected("shard", {5, 0}, {4, open});
  rejected("shard", {-1, 0}, {open, open});
  // Position 12 is local position 10 from begin 2, beyond the 8 rows (from begin 5, row 7).
  rejected("seq_pos", {0, 2}, {open, open}, 1, 12);
  // Slot 0's range ends at 4: a run at 2, 3, 4 straddles its last position 3 (3, 4, 5 does not).
  const DecodeRun draft(small_cache(), 1, 3, 3);
  expect_rejected("shard",
                  [&] {
                    draft.run_sharded({0, 0, 0}, {2, 3, 4}, {0, 0}, {4, open});
                  },
                  {&draft.out});
  // Accepted: the above made valid, and ranges of slots no query names, which (like block
  // table entries) may hold anything.
  decode.run_sharded({1}, {12}, {0, 5}, {open, open});
  draft.run_sharded({0, 0, 0}, {3, 4, 5}, {0, 0}, {4, open});
  decode.run_sharded({0}, {3}, {0, 5}, {open, 4});
}

TEST(InputRules, NegativeOrZeroSizesAreRejected) {
  KvCacheConfig c = small_cache();
  c.slots = 0;
  expect_rejected("slots", [&] { KvCache cache(c); }, {});
  c = small_cache();
  c.n_kv_heads = -1;
  expect_rejected("n_kv_heads", [&] { KvCache cache(c); }, {});
  c = small_paged_cache();
  c.page_size = -16;
  expect_rejected("page_size", [&] { KvCache cache(c); }, {});
  c = small_paged_cache();
  c.pages = 0;
  expect_rejected("pages", [&] { KvCache cache(c); }, {});
  expect_rejected("options.query_tokens",
                  [&] { plan_decode(small_cache(), {.n_heads = 1, .query_tokens = 0}, 1); }, {});
  expect_rejected("max_queries", [&] { plan_decode(small_cache(), {.n_heads = 1}, 0); }, {});
  const Values mix(2 * 24, 4), scale(3, 5), base(24, 6);
  const Poisoned split(2 * 24 * 4);
  expect_rejected("embd",
                  [&] {
                    hc_split({.embd = 0}, mix.view({2, 24}), scale.view({3}), base.view({24}),
                             split.view(DType::f32, {2, 24}));
                  },
                  {&split});
  const PoisonedCache target(small_cache());
  EXPECT_EQ(append_error(target, {0}, {-1}), "positions");
  EXPECT_TRUE(target.untouched());
}

TEST(InputRules, NullOrMisalignedPointersAreRejected) {
  const Values x(2 * 256, 1);
  const Poisoned codes(2 * 256 + 4), norms(2 * 4 + 4);
  expect_rejected("codes",
                  [&] {
                    encode_rows({}, x.view({2, 256}), TensorView{}, norms.view(DType::f32, {2, 1}));
                  },
                  {&codes, &norms});
  TensorView misaligned = norms.view(DType::f32, {2, 1});
  misaligned.data = static_cast<char*>(misaligned.data) + 2;
  expect_rejected("norms",
                  [&] {
                    encode_rows({}, x.view({2, 256}), codes.view(DType::u8, {2, 256}), misaligned);
                  },
                  {&codes, &norms});
  const Values input(32, 2);
  const Poisoned weight(34 + 1), out(4);
  TensorView odd = weight.view(DType::u8, {1, 34});
  odd.data = static_cast<char*>(odd.data) + 1;
  expect_rejected("weight",
                  [&] {
                    q8_matvec(odd, input.view({1, 32}), out.view(DType::f32, {1, 1}));
                  },
                  {&out});
}

TEST(InputRules, MismatchedDtypesShapesAndStridesAreRejected) {
  const Values y(2 * 256, 1);
  const Poisoned x(2 * 256 * 4);
  TensorView strided = x.view(DType::f32, {2, 256});
  strided.strides[1] = 2;
  expect_rejected("x", [&] { unrotate_rows(256, y.view({2, 256}), strided); }, {&x});
  TensorView far = x.view(DType::f32, {1, 256});
  far.strides[0] = std::int64_t{1} << 48;  // byte offsets from it could overflow
  expect_rejected("x", [&] { unrotate_rows(256, y.view({1, 256}), far); }, {&x});
  expect_rejected("x",
                  [&] {
                    unrotate_rows(256, y.view({2, 256}), x.view(DType::f16, {2, 256}));
                  },
                  {&x});
  expect_rejected("x",
                  [&] {
                    unrotate_rows(256, y.view({2, 256}), x.view(DType::f32, {1, 256}));
                  },
                  {&x});
  const DecodeRun decode(small_cache(), 1, 1);
  expect_rejected("lse", [&] { decode.run({0}, {3}, {}, {1}); }, {&decode.out, &decode.lse});
  const DecodeRun paged(small_paged_cache(), 1, 1);
  expect_rejected("cache.block_table",
                  [&] {
                    paged.run({0}, {3}, {0, 1});
                  },
                  {&paged.out, &paged.lse});
}

TEST(InputRules, OverlappingOutputsAreRejected) {
  const Poisoned rows(3 * 256 * 4);
  const TensorView first = rows.view(DType::f32, {2, 256});
  TensorView shifted = first;
  shifted.data = static_cast<float*>(shifted.data) + 256;  // overlaps row 1 of `first`
  expect_rejected("y", [&] { rotate_rows(256, first, shifted); }, {});
  EXPECT_TRUE(rows.untouched());
  const Values input(32, 2);
  const Poisoned weight(34);
  expect_rejected("out",
                  [&] {
                    q8_matvec(weight.view(DType::u8, {1, 34}), input.view({1, 32}),
                              weight.view(DType::f32, {1, 1}));
                  },
                  {});
}

// A valid but unusual stride runs like the contiguous view: a capacity-1 cache whose position
// stride is 2^47 (the CPU backend once prefetched a row's stride rather than its bytes, a loop
// of 2^42 steps, which ctest's timeout fails; found by fuzz/api_fuzzer).
TEST(InputRules, UnusualValidStridesRunLikeContiguousOnes) {
  KvCacheConfig c = small_cache();
  c.capacity = 1;
  const DecodeRun contiguous(c, 1, 1);
  const Values k(256, 7), v(256, 8);
  const Buffer zero = indices({0});
  append_kv(contiguous.cache.view(), k.view({1, 1, 256}), v.view({1, 1, 256}),
            zero.view(DType::i32, {1}), zero.view(DType::i32, {1}));
  contiguous.run({0}, {0});
  KvCacheView strided = contiguous.cache.view();
  for (TensorView* side : {&strided.k, &strided.v, &strided.v_norms}) {
    side->strides[2] = std::int64_t{1} << 47;
  }
  const Poisoned out(256 * 4);
  run_decode(contiguous.plan, strided, contiguous.q.view({1, 1, 256}), zero.view(DType::i32, {1}),
             zero.view(DType::i32, {1}), out.view(DType::f32, {1, 1, 256}),
             contiguous.workspace.view(DType::u8, {contiguous.plan.workspace_bytes}));
  EXPECT_EQ(testing::to_host<float>(out.buffer), testing::to_host<float>(contiguous.out.buffer));
}

// NaN and Inf inputs run through (IEEE propagation), never crash: the Q8_0 quantizer once
// converted a NaN to an integer.
TEST(InputRules, NanAndInfInputsNeverCrash) {
  std::vector<float> values(64, 1.0f);
  values[3] = std::numeric_limits<float>::quiet_NaN();
  values[40] = std::numeric_limits<float>::infinity();
  std::vector<std::uint8_t> q8(2 * 34);
  quantize_q8_0(TensorView::contiguous(values.data(), DType::f32, {1, 64}),
                TensorView::contiguous(q8.data(), DType::u8, {1, 68}));
  float out = 0.0f;
  q8_matvec(TensorView::contiguous(q8.data(), DType::u8, {1, 68}),
            TensorView::contiguous(values.data(), DType::f32, {1, 64}),
            TensorView::contiguous(&out, DType::f32, {1, 1}));
  EXPECT_TRUE(std::isnan(out));
}

// SPEC §7.1: sizes beyond the documented limits are rejected before they size anything.
TEST(InputRules, SizesBeyondTheDocumentedLimitsAreRejected) {
  KvCacheConfig c = small_cache();
  c.slots = std::int64_t{1} << 31;
  expect_rejected("slots", [&] { KvCache cache(c); }, {});
  c = small_cache();
  c.slots = std::int64_t{1} << 30;
  c.capacity = std::int64_t{1} << 30;
  expect_rejected("capacity", [&] { KvCache cache(c); }, {});
  c = small_paged_cache();
  c.n_kv_heads = 2;
  c.page_size = 128;
  c.pages = INT32_MAX;  // 2^31 pages x 2 heads x 128 rows x 772 bytes
  expect_rejected("pages", [&] { KvCache cache(c); }, {});
  c.pages = std::int64_t{1} << 31;
  expect_rejected("pages", [&] { KvCache cache(c); }, {});
  expect_rejected("options.query_tokens",
                  [&] { plan_decode(small_cache(), {.n_heads = 1, .query_tokens = 9}, 9); }, {});
  expect_rejected("max_queries",
                  [&] { plan_decode(small_cache(), {.n_heads = 1}, std::int64_t{1} << 40); }, {});
  expect_rejected("embd", [&] { plan_hc_pre({.embd = INT64_MAX / 2}, 1, Device::cpu); }, {});
  expect_rejected("sinkhorn_iters",
                  [&] { plan_hc_pre({.sinkhorn_iters = 1 << 30}, 1, Device::cpu); }, {});
  expect_rejected("max_rows", [&] { plan_hc_pre({}, INT64_MAX, Device::cpu); }, {});
  expect_rejected("shape",
                  [&] {
                    HostTensor::zeros(DType::f32, {std::int64_t{1} << 40, 1 << 30});
                  },
                  {});

  // A header promising 2^96 bytes in a file of 128.
  const auto path = std::filesystem::temp_directory_path() /
                    ("turbodecode_rules_" + std::to_string(testing::fresh_seed()) + ".npy");
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (281474976710656, 281474976710656), }";
  dict.append(117 - dict.size(), ' ');
  std::ofstream(path, std::ios::binary)
      << std::string("\x93NUMPY\x01\x00", 8) << static_cast<char>(dict.size() + 1) << '\0' << dict
      << '\n';
  expect_rejected(path.string(), [&] { read_npy(path); }, {});
  std::filesystem::remove(path);
}

// SPEC §7.1: an empty input is a defined empty result or a clear error.
TEST(InputRules, EmptyInputsAreAnEmptyResultOrAClearError) {
  const Poisoned codes(256), norms(4);
  encode_rows({}, TensorView::contiguous(codes.buffer.data(), DType::f32, {0, 256}),
              codes.view(DType::u8, {0, 256}), norms.view(DType::f32, {0, 1}));
  EXPECT_TRUE(codes.untouched() && norms.untouched());
  const PoisonedCache target(small_cache());
  EXPECT_EQ(append_error(target, {}, {}), "");
  EXPECT_TRUE(target.untouched());
  const DecodeRun decode(small_cache(), 1, 1);
  const Values q(256, 1);
  const Buffer none = indices({});
  expect_rejected("q",
                  [&] {
                    run_decode(decode.plan, decode.cache.view(), q.view({0, 1, 256}),
                               none.view(DType::i32, {0}), none.view(DType::i32, {0}),
                               decode.out.view(DType::f32, {0, 1, 256}),
                               decode.workspace.view(DType::u8, {decode.plan.workspace_bytes}));
                  },
                  {&decode.out});
  const Poisoned split(24 * 4);
  expect_rejected(
      "mix",
      [&] {
        hc_split({}, q.view({0, 24}), q.view({3}), q.view({24}), split.view(DType::f32, {0, 24}));
      },
      {&split});
}

}  // namespace
}  // namespace turbodecode
