// Decode attention on the CPU backend against the double-precision oracle (SPEC §2, §5, §7).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "attention/chunks.h"
#include "attention/state.h"
#include "cache_contents.h"
#include "common/f16.h"
#include "cpu_decode_call.h"
#include "decode_cases.h"
#include "reference/attention_oracle.h"
#include "test_support.h"
#include "turbodecode/attention.h"
#include "turbodecode/error.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode {
namespace {

using testing::fresh_seed;

using testing::DecodeCall;
using testing::fill_random;

using testing::kKFormats;
using testing::kVFormats;

// Relative L2 of a row against the oracle (SPEC §5), and the lse's error against the oracle's.
constexpr double kTolerance = 2e-3;
constexpr double kLseTolerance = 1e-4;

// ---------------------------------------------------------------------------------------------
// The matrix (decode_cases.h): every visibility × K format × V format, the other dimensions
// rotating; each row's output and lse against the oracle.

// Worst errors of a run of cases.
struct MatrixErrors {
  double out = 0.0, lse = 0.0;
  std::size_t rows = 0;
};

// Runs one case of the matrix on fresh data: each row's output and lse against the oracle.
void check_matrix_case(const testing::DecodeCase& dc, MatrixErrors& errors) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(dc.describe() + " seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  testing::BlockTable table;
  if (dc.cache.page_size > 0) table = testing::shuffled_table(dc.cache, rng, true);
  const KvCache storage(dc.cache);
  const KvCacheView cache = table.entries.empty() ? storage.view() : storage.view(table.view());
  fill_random(cache, seed);
  const DecodePlan plan =
      plan_decode(dc.cache, dc.options, static_cast<std::int64_t>(dc.slots.size()));
  const DecodeCall call(plan, dc.slots, dc.positions, seed + 1, dc.row_padding);
  call.run_with_lse(plan, cache);
  const auto [expected, lse] =
      oracle::decode_attention(cache, dc.options, call.q_values, dc.slots, dc.positions);
  const std::size_t row = static_cast<std::size_t>(call.heads * call.dim);
  for (std::int64_t i = 0; i < call.n; ++i) {
    const std::vector<double> want(expected.begin() + static_cast<std::ptrdiff_t>(i * row),
                                   expected.begin() + static_cast<std::ptrdiff_t>((i + 1) * row));
    const double error = testing::relative_l2(call.output(i), want);
    EXPECT_LE(error, kTolerance) << "query " << i;
    errors.out = std::max(errors.out, error);
    const std::vector<float> got_lse = call.lse_values(i);
    for (std::int64_t h = 0; h < call.heads; ++h) {
      const double want_lse = lse[static_cast<std::size_t>(i * call.heads + h)];
      const double lse_error = std::abs(got_lse[static_cast<std::size_t>(h)] - want_lse) /
                               std::max(1.0, std::abs(want_lse));
      EXPECT_LE(lse_error, kLseTolerance) << "query " << i << " head " << h;
      errors.lse = std::max(errors.lse, lse_error);
    }
  }
  errors.rows += dc.slots.size();
}

TEST(DecodeAttention, MatchesOracleOverTheMatrix) {
  const std::vector<testing::DecodeCase> cases = testing::decode_matrix(kKFormats, kVFormats);
  MatrixErrors errors;
  for (const testing::DecodeCase& dc : cases) check_matrix_case(dc, errors);
  std::printf("[ matrix ] %zu cases, %zu query rows, worst relative L2 %.3g, lse %.3g\n",
              cases.size(), errors.rows, errors.out, errors.lse);
}

// The CPU backend dispatches to the best SIMD target at run time; every target it has for
// this CPU runs every seventh case of the matrix (all formats, head dims and group sizes
// appear among them).
TEST(DecodeAttention, MatchesOracleOnEverySimdTarget) {
  const std::vector<testing::DecodeCase> cases = testing::decode_matrix(kKFormats, kVFormats);
  testing::for_each_simd_target([&] {
    MatrixErrors errors;
    for (std::size_t i = 0; i < cases.size(); i += 7) check_matrix_case(cases[i], errors);
  });
}

// ---------------------------------------------------------------------------------------------
// The split merge (state.h) is associative: merging parts in any grouping gives the same
// result within rounding; empty parts change nothing; all-empty gives zeros, never NaN.

struct PartialState {
  attention::SoftmaxState state;
  std::vector<float> o;
};

PartialState merge(const PartialState& a, const PartialState& b) {
  const float m = attention::merged_max(a.state, b.state);
  const float wa = attention::merge_weight(a.state.m, m);
  const float wb = attention::merge_weight(b.state.m, m);
  PartialState merged{{m, wa * a.state.l + wb * b.state.l}, std::vector<float>(a.o.size())};
  for (std::size_t j = 0; j < a.o.size(); ++j) merged.o[j] = wa * a.o[j] + wb * b.o[j];
  return merged;
}

std::vector<float> normalised(const PartialState& p) {
  std::vector<float> out(p.o);
  for (float& x : out) x *= attention::output_scale(p.state.l);
  return out;
}

TEST(DecodeAttention, SplitMergeIsAssociative) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  constexpr int kDim = 64;
  std::vector<PartialState> parts;
  for (int i = 0; i < 7; ++i) {
    if (i == 2 || i == 5) {  // empty splits
      parts.push_back({attention::empty_state(), std::vector<float>(kDim, 0.0f)});
      continue;
    }
    // A real split's state: positions with random scores and values.
    PartialState p{attention::empty_state(), std::vector<float>(kDim, 0.0f)};
    for (int pos = 0; pos < 5; ++pos) {
      std::vector<float> v(kDim);
      for (float& x : v) x = normal(rng);
      p = merge(p, {{4.0f * normal(rng), 1.0f}, v});
    }
    parts.push_back(p);
  }
  PartialState left = parts[0];
  for (std::size_t i = 1; i < parts.size(); ++i) left = merge(left, parts[i]);
  PartialState right = parts.back();
  for (std::size_t i = parts.size() - 1; i-- > 0;) right = merge(parts[i], right);
  const PartialState tree = merge(merge(merge(parts[0], parts[1]), merge(parts[2], parts[3])),
                                  merge(merge(parts[4], parts[5]), parts[6]));
  const std::vector<float> left_result = normalised(left);
  const std::vector<double> reference(left_result.begin(), left_result.end());
  EXPECT_LE(testing::relative_l2(normalised(right), reference), 1e-6);
  EXPECT_LE(testing::relative_l2(normalised(tree), reference), 1e-6);

  const PartialState with_empty = merge(parts[1], parts[2]);
  EXPECT_EQ(with_empty.state.m, parts[1].state.m);
  EXPECT_EQ(with_empty.state.l, parts[1].state.l);
  EXPECT_EQ(with_empty.o, parts[1].o);  // bitwise: an empty split weighs exactly 0

  const PartialState nothing = merge(parts[2], parts[5]);
  for (float x : normalised(nothing)) EXPECT_EQ(x, 0.0f);
}

// ---------------------------------------------------------------------------------------------
// Batch invariance and determinism (SPEC §2.6), asserted bitwise, with automatic splits.

TEST(DecodeAttention, RowIsBitwiseIdenticalAloneAndInAnyBatch) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (RowFormat k_format : {RowFormat::f16, RowFormat::tq8}) {
    const KvCacheConfig config{
        6, 2, 4000, 256, LayerKind::linear, k_format, RowFormat::tq6, 1.0f, Device::cpu};
    KvCache cache(config);
    fill_random(cache.view(), seed);
    DecodeOptions options;
    options.n_heads = 4;
    const DecodePlan plan = plan_decode(config, options, 8);
    const std::vector<std::int32_t> slots = {3, 0, 5, 1, 4, 2};
    const std::vector<std::int32_t> positions = {3999, 0, 700, 2500, 31, 1200};
    const DecodeCall batch(plan, slots, positions, seed + 1);
    batch.run(plan, cache.view());
    const DecodeCall again(plan, slots, positions, seed + 1);
    again.run(plan, cache.view());
    for (std::int64_t i = 0; i < batch.n; ++i) {
      SCOPED_TRACE("query " + std::to_string(i));
      DecodeCall alone(plan, {slots[i]}, {positions[i]}, seed);
      std::copy_n(batch.q_values.begin() + i * batch.heads * batch.dim, batch.heads * batch.dim,
                  alone.q().as<float>());
      alone.run(plan, cache.view());
      EXPECT_EQ(alone.output(0), batch.output(i));
      EXPECT_EQ(again.output(i), batch.output(i));
    }
  }
}

TEST(DecodeAttention, NanInOneQueryPropagatesToItsRowOnly) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const KvCacheConfig config{
      2, 1, 300, 256, LayerKind::linear, RowFormat::f16, RowFormat::tq8, 1.0f, Device::cpu};
  KvCache cache(config);
  fill_random(cache.view(), seed);
  DecodeOptions options;
  options.n_heads = 2;
  const DecodePlan plan = plan_decode(config, options, 2);
  const DecodeCall clean(plan, {0, 1}, {299, 150}, seed + 1);
  clean.run(plan, cache.view());
  DecodeCall poisoned(plan, {0, 1}, {299, 150}, seed + 1);
  poisoned.q().as<float>()[3] = NAN;  // query 0, head 0
  poisoned.run(plan, cache.view());
  const std::vector<float> row0 = poisoned.output(0);
  EXPECT_TRUE(std::isnan(row0[0]));
  EXPECT_EQ(poisoned.output(1), clean.output(1));
}

// ---------------------------------------------------------------------------------------------
// End-to-end fidelity (SPEC §5): the quantized cache, filled by append_kv, against exact f32
// attention on the unquantized rows.

double fidelity_cosine(int head_dim, RowFormat v_format, bool outlier_channels,
                       std::uint64_t seed) {
  constexpr std::int64_t kPositions = 1500;
  constexpr int kKvHeads = 2, kHeads = 4;
  const KvCacheConfig config{
      1,        kKvHeads, kPositions, head_dim, LayerKind::linear, RowFormat::f16,
      v_format, 1.0f,     Device::cpu};
  KvCache cache(config);
  const auto count = static_cast<std::size_t>(kPositions * kKvHeads * head_dim);
  std::vector<float> k = testing::gaussian(count, seed);
  std::vector<float> v = testing::gaussian(count, seed + 1);
  if (outlier_channels) {  // a few channels 20x larger, as in real activations
    for (std::size_t i = 0; i < count; ++i) {
      if (i % static_cast<std::size_t>(head_dim) % 37 == 5) v[i] *= 20.0f;
    }
  }
  // Exact attention sees the F16-rounded K the cache holds; only V's quantization is measured.
  for (float& x : k) x = f16_to_f32(f32_to_f16(x));
  std::vector<std::int32_t> positions(kPositions), slots(kPositions, 0);
  for (std::int32_t p = 0; p < kPositions; ++p) positions[static_cast<std::size_t>(p)] = p;
  const Buffer k_buffer = testing::to_device(Device::cpu, k);
  const Buffer v_buffer = testing::to_device(Device::cpu, v);
  const Buffer slot_buffer = testing::to_device(Device::cpu, slots);
  const Buffer pos_buffer = testing::to_device(Device::cpu, positions);
  append_kv(cache.view(), k_buffer.view(DType::f32, {kPositions, kKvHeads, head_dim}),
            v_buffer.view(DType::f32, {kPositions, kKvHeads, head_dim}),
            slot_buffer.view(DType::i32, {kPositions}), pos_buffer.view(DType::i32, {kPositions}));
  DecodeOptions options;
  options.n_heads = kHeads;
  const DecodePlan plan = plan_decode(config, options, 1);
  const DecodeCall call(plan, {0}, {static_cast<std::int32_t>(kPositions - 1)}, seed + 2);
  call.run(plan, cache.view());
  const std::vector<double> exact =
      oracle::exact_attention(call.q_values, k, v, kHeads, kKvHeads, head_dim, 0.0, 0.0);
  return testing::cosine(call.output(0), exact);
}

TEST(DecodeAttention, EightBitValuesMatchExactAttention) {
  for (int head_dim : {256, 512}) {
    for (bool outliers : {false, true}) {
      const std::uint64_t seed = fresh_seed();
      SCOPED_TRACE("D=" + std::to_string(head_dim) + " outliers=" + std::to_string(outliers) +
                   " seed=" + std::to_string(seed));
      const double cosine = fidelity_cosine(head_dim, RowFormat::tq8, outliers, seed);
      std::printf("[ fidelity ] D=%d tq8 %s: cosine %.7f\n", head_dim,
                  outliers ? "outlier channels" : "gaussian", cosine);
      EXPECT_GE(cosine, 0.9995);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Bad input (SPEC §7): each rule raises InvalidArgument naming the argument, before any write.

template <class Call>
void expect_rejected(const std::string& argument, Call&& call) {
  SCOPED_TRACE("expected argument " + argument);
  try {
    call();
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
}

// Two small caches (linear, ring) and options a plan accepts for both masks' defaults.
struct PlanInputs {
  KvCacheConfig linear{
      2, 2, 128, 256, LayerKind::linear, RowFormat::f16, RowFormat::tq8, 1.0f, Device::cpu};
  KvCacheConfig ring = with_kind(linear, LayerKind::ring);
  DecodeOptions good = with_heads(4);

  static KvCacheConfig with_kind(KvCacheConfig config, LayerKind kind) {
    config.kind = kind;
    return config;
  }
  static DecodeOptions with_heads(int n_heads) {
    DecodeOptions options;
    options.n_heads = n_heads;
    return options;
  }
};

TEST(DecodeAttention, PlanRejectsBadOptions) {
  const auto [linear, ring, good] = PlanInputs();
  const auto with = [&](auto change) {
    DecodeOptions o = good;
    change(o);
    return o;
  };
  expect_rejected("options.n_heads",
                  [&] { plan_decode(linear, with([](auto& o) { o.n_heads = 0; }), 1); });
  expect_rejected("options.n_heads",
                  [&] { plan_decode(linear, with([](auto& o) { o.n_heads = 3; }), 1); });
  expect_rejected("options.mask", [&] { plan_decode(ring, good, 1); });
  expect_rejected("options.mask", [&] {
    plan_decode(linear, with([](auto& o) { o.mask = MaskKind::sliding_ring; }), 1);
  });
  expect_rejected("options.mask", [&] {
    plan_decode(ring, with([](auto& o) { o.mask = MaskKind::sliding_linear; }), 1);
  });
  expect_rejected("options.mask", [&] {
    plan_decode(linear, with([](auto& o) { o.mask = static_cast<MaskKind>(7); }), 1);
  });
  expect_rejected("options.sliding_window",
                  [&] { plan_decode(linear, with([](auto& o) { o.sliding_window = -1; }), 1); });
  for (float bad : {-1.0f, NAN, INFINITY}) {
    expect_rejected("options.scale",
                    [&] { plan_decode(linear, with([&](auto& o) { o.scale = bad; }), 1); });
    expect_rejected("options.softcap",
                    [&] { plan_decode(linear, with([&](auto& o) { o.softcap = bad; }), 1); });
  }
  for (std::int64_t bad : {std::int64_t{-32}, std::int64_t{48}}) {
    expect_rejected("options.fixed_chunk_positions", [&] {
      plan_decode(linear, with([&](auto& o) { o.fixed_chunk_positions = bad; }), 1);
    });
  }
  expect_rejected("max_queries", [&] { plan_decode(linear, good, 0); });
  KvCacheConfig bad_dim = linear;
  bad_dim.head_dim = 128;
  expect_rejected("head_dim", [&] { plan_decode(bad_dim, good, 1); });

  const DecodePlan plan =
      plan_decode(linear, with([](auto& o) { o.fixed_chunk_positions = 64; }), 3);
  EXPECT_EQ(plan.chunk_positions(1), 64);
  EXPECT_EQ(plan.chunk_positions(100000), 64);
  EXPECT_GE(plan.max_chunks, (linear.capacity + 63) / 64);
  EXPECT_FLOAT_EQ(plan.options.scale, 1.0f / 16.0f);  // 0 resolves to 1/sqrt(D)
}

TEST(DecodeAttention, RunRejectsBadInputsAndWritesNothing) {
  const KvCacheConfig config{
      2, 2, 128, 256, LayerKind::linear, RowFormat::tq8, RowFormat::tq8, 1.0f, Device::cpu};
  KvCache cache(config);
  fill_random(cache.view(), fresh_seed());
  DecodeOptions options;
  options.n_heads = 4;
  const DecodePlan plan = plan_decode(config, options, 2);
  const DecodeCall call(plan, {0, 1}, {5, 127}, fresh_seed());
  struct Args {
    KvCacheView cache;
    TensorView q, slot_ids, seq_pos, out, workspace;
  };
  const Args good{cache.view(),   call.q(),   call.slot_ids(),
                  call.seq_pos(), call.out(), call.workspace()};
  const auto run_with = [&](const std::string& argument, auto change) {
    Args a = good;
    change(a);
    expect_rejected(argument, [&] {
      run_decode(plan, a.cache, a.q, a.slot_ids, a.seq_pos, a.out, a.workspace);
    });
    EXPECT_TRUE(call.out_untouched()) << argument;
  };
  std::vector<std::int32_t> bad_slot = {0, 2}, negative_pos = {-1, 3}, beyond = {0, 128};
  const Buffer bad_slot_buffer = testing::to_device(Device::cpu, bad_slot);
  const Buffer negative_buffer = testing::to_device(Device::cpu, negative_pos);
  const Buffer beyond_buffer = testing::to_device(Device::cpu, beyond);
  run_with("slot_ids", [&](Args& a) { a.slot_ids = bad_slot_buffer.view(DType::i32, {2}); });
  run_with("seq_pos", [&](Args& a) { a.seq_pos = negative_buffer.view(DType::i32, {2}); });
  run_with("seq_pos", [&](Args& a) { a.seq_pos = beyond_buffer.view(DType::i32, {2}); });
  run_with("q", [&](Args& a) { a.q.dtype = DType::f16; });
  run_with("q", [&](Args& a) { a.q.shape[1] = 2; });
  run_with("q", [&](Args& a) { a.q.data = nullptr; });
  run_with("q", [&](Args& a) { a.q.strides[2] = 2; });
  run_with("q", [&](Args& a) { a.q = a.q.slice(0, 0, 0); });
  run_with("out", [&](Args& a) { a.out.shape[0] = 1; });
  run_with("out", [&](Args& a) { a.out.strides[2] = 0; });
  run_with("out", [&](Args& a) { a.out.data = static_cast<char*>(a.out.data) + 2; });
  run_with("out", [&](Args& a) { a.out = a.q; });
  run_with("out", [&](Args& a) { a.out.data = a.cache.v.data; });
  run_with("slot_ids", [&](Args& a) { a.slot_ids.dtype = DType::f32; });
  run_with("seq_pos", [&](Args& a) { a.seq_pos.shape[0] = 3; });
  run_with("workspace", [&](Args& a) { a.workspace.shape[0] = plan.workspace_bytes - 1; });
  run_with("workspace",
           [&](Args& a) { a.workspace.data = static_cast<char*>(a.workspace.data) + 4; });
  run_with("workspace", [&](Args& a) { a.workspace.data = a.cache.k.data; });
  run_with("cache", [&](Args& a) { a.cache.config.capacity = 64; });
  run_with("cache.k_norms", [&](Args& a) { a.cache.k_norms = {}; });
  run_with("cache.v", [&](Args& a) { a.cache.v.shape[2] = 64; });

  // More queries than the plan allows.
  const DecodeCall three(plan, {0, 1, 0}, {1, 2, 3}, fresh_seed());
  expect_rejected("q", [&] { three.run(plan, cache.view()); });
  EXPECT_TRUE(three.out_untouched());
}

TEST(DecodeAttention, PlanRejectsBadRunsAndChunks) {
  const auto [linear, ring, good] = PlanInputs();
  DecodeOptions ring_draft = good;
  ring_draft.mask = MaskKind::sliding_ring;
  ring_draft.sliding_window = 126;
  ring_draft.query_tokens = 3;  // capacity 128 = 126 + 3 − 1: just enough
  const auto with = [](DecodeOptions o, auto change) {
    change(o);
    return o;
  };
  for (int bad : {0, -1, kMaxQueryTokens + 1}) {
    expect_rejected("options.query_tokens", [&] {
      plan_decode(linear, with(good, [&](auto& o) { o.query_tokens = bad; }), 16);
    });
  }
  EXPECT_NO_THROW(plan_decode(ring, ring_draft, 3));
  expect_rejected("options.query_tokens", [&] {
    plan_decode(ring, with(ring_draft, [](auto& o) { o.query_tokens = 4; }), 4);
  });
  expect_rejected("options.query_tokens", [&] {
    plan_decode(ring, with(ring_draft, [](auto& o) { o.sliding_window = 0; }), 3);
  });
  expect_rejected("max_queries", [&] { plan_decode(ring, ring_draft, 2); });
  for (std::int64_t bad : {-32, 33, 16}) {
    expect_rejected("options.fixed_chunk_positions", [&] {
      plan_decode(linear, with(good, [&](auto& o) { o.fixed_chunk_positions = bad; }), 1);
    });
  }
  KvCacheConfig long_cache = linear;
  long_cache.capacity = 200000;  // 6251 chunks of 32 at worst
  expect_rejected("options.fixed_chunk_positions", [&] {
    plan_decode(long_cache, with(good, [](auto& o) { o.fixed_chunk_positions = 32; }), 1);
  });

  // The automatic policy: 512 positions per chunk until a row would need more than 17 chunks.
  const DecodePlan automatic = plan_decode(long_cache, good, 1);
  EXPECT_EQ(automatic.max_chunks, 17);
  EXPECT_EQ(automatic.chunk_positions(1), 512);
  EXPECT_EQ(automatic.chunk_positions(8192), 512);
  EXPECT_EQ(automatic.chunk_positions(8193), 1024);
  EXPECT_EQ(automatic.chunk_positions(200000), 16384);
  const DecodePlan fixed =
      plan_decode(linear, with(good, [](auto& o) { o.fixed_chunk_positions = 64; }), 1);
  EXPECT_EQ(fixed.chunk_positions(100), 64);
  EXPECT_EQ(fixed.max_chunks, 3);  // 128 positions starting mid-chunk
}

// The automatic policy with a spread (the CUDA backend's limits): chunks of min_positions while
// a row has at most kSpreadChunks of them, doubled up to spread_positions, then doubled again
// only as max_chunks demands.
TEST(DecodeAttention, ChunkPolicySpreadsShortRowsAndLengthensLongOnes) {
  const attention::ChunkPolicy policy{128, 1025, 512, 0};
  EXPECT_EQ(attention::chunk_positions(policy, 1), 128);
  EXPECT_EQ(attention::chunk_positions(policy, 128 * attention::kSpreadChunks), 128);
  EXPECT_EQ(attention::chunk_positions(policy, 128 * attention::kSpreadChunks + 1), 256);
  EXPECT_EQ(attention::chunk_positions(policy, 256 * attention::kSpreadChunks + 1), 512);
  EXPECT_EQ(attention::chunk_positions(policy, 131072), 512);
  EXPECT_EQ(attention::chunk_positions(policy, 512 * 1024), 512);
  EXPECT_EQ(attention::chunk_positions(policy, 512 * 1024 + 1), 1024);
  // Without a spread (spread_positions = min_positions) only max_chunks counts.
  const attention::ChunkPolicy plain{128, 1025, 128, 0};
  EXPECT_EQ(attention::chunk_positions(plain, 131072), 128);
  EXPECT_EQ(attention::chunk_positions(plain, 131073), 256);
}

TEST(DecodeAttention, RunRejectsBadRunsAndLseAndWritesNothing) {
  const KvCacheConfig config{
      2, 2, 128, 256, LayerKind::linear, RowFormat::f16, RowFormat::tq4, 1.0f, Device::cpu};
  KvCache cache(config);
  fill_random(cache.view(), fresh_seed());
  DecodeOptions options;
  options.n_heads = 4;
  options.query_tokens = 2;
  const DecodePlan plan = plan_decode(config, options, 4);
  const DecodeCall call(plan, {1, 1, 0, 0}, {5, 6, 126, 127}, fresh_seed());
  struct Args {
    TensorView q, slot_ids, seq_pos, out, lse;
  };
  const Args good{call.q(), call.slot_ids(), call.seq_pos(), call.out(), call.lse()};
  const auto run_with = [&](const std::string& argument, auto change) {
    Args a = good;
    change(a);
    expect_rejected(argument, [&] {
      run_decode(plan, cache.view(), a.q, a.slot_ids, a.seq_pos, a.out, a.lse, call.workspace());
    });
    EXPECT_TRUE(call.out_untouched()) << argument;
  };
  std::vector<std::int32_t> split_run = {1, 0, 0, 0}, gap = {5, 7, 126, 127},
                            backwards = {6, 5, 126, 127};
  const Buffer split_buffer = testing::to_device(Device::cpu, split_run);
  const Buffer gap_buffer = testing::to_device(Device::cpu, gap);
  const Buffer backwards_buffer = testing::to_device(Device::cpu, backwards);
  run_with("slot_ids", [&](Args& a) { a.slot_ids = split_buffer.view(DType::i32, {4}); });
  run_with("seq_pos", [&](Args& a) { a.seq_pos = gap_buffer.view(DType::i32, {4}); });
  run_with("seq_pos", [&](Args& a) { a.seq_pos = backwards_buffer.view(DType::i32, {4}); });
  run_with("q", [&](Args& a) {  // three rows: not whole runs
    a.q = a.q.slice(0, 0, 3);
    a.out = a.out.slice(0, 0, 3);
    a.lse = a.lse.slice(0, 0, 3);
    a.slot_ids = a.slot_ids.slice(0, 0, 3);
    a.seq_pos = a.seq_pos.slice(0, 0, 3);
  });
  run_with("lse", [&](Args& a) { a.lse.dtype = DType::f16; });
  run_with("lse", [&](Args& a) { a.lse.shape[1] = 2; });
  run_with("lse", [&](Args& a) { a.lse.strides[1] = 2; });
  run_with("lse", [&](Args& a) { a.lse.data = a.q.data; });
  run_with("lse", [&](Args& a) { a.lse.data = a.out.data; });
  run_with("lse", [&](Args& a) { a.lse.data = call.workspace().data; });

  // The good call runs, and writes lse.
  run_decode(plan, cache.view(), good.q, good.slot_ids, good.seq_pos, good.out, good.lse,
             call.workspace());
  for (std::int64_t i = 0; i < 4; ++i) {
    for (float x : call.lse_values(i)) EXPECT_TRUE(std::isfinite(x));
  }
}

// A paged cache's block-table entries that hold rows a query sees must name pages of the cache
// (SPEC §7.1); entries of rows nobody sees are not read.
TEST(DecodeAttention, RunRejectsBlockTableEntriesNamingNoPageAndWritesNothing) {
  KvCacheConfig config{
      2, 1, 128, 256, LayerKind::linear, RowFormat::f16, RowFormat::tq8, 1.0f, Device::cpu};
  config.page_size = 16;
  config.pages = 16;
  KvCache cache(config);
  fill_random(cache.view(), fresh_seed());
  DecodeOptions options;
  options.n_heads = 2;
  const DecodePlan plan = plan_decode(config, options, 2);
  const DecodeCall call(plan, {0, 1}, {20, 40}, fresh_seed());
  std::vector<std::int32_t> table(16);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  const auto run_with = [&](std::int32_t entry, std::int32_t value) {
    std::vector<std::int32_t> bad = table;
    bad[static_cast<std::size_t>(entry)] = value;
    const KvCacheView view = cache.view(TensorView::contiguous(bad.data(), DType::i32, {2, 8}));
    run_decode(plan, view, call.q(), call.slot_ids(), call.seq_pos(), call.out(), call.lse(),
               call.workspace());
  };
  for (std::int32_t value : {-1, 16}) {
    expect_rejected("cache.block_table", [&] { run_with(8 + 2, value); });  // slot 1, rows 32-47
    EXPECT_TRUE(call.out_untouched());
  }
  run_with(8 + 3, -1);  // slot 1's rows 48-63: beyond position 40, never read
  EXPECT_FALSE(call.out_untouched());
}

}  // namespace
}  // namespace turbodecode
