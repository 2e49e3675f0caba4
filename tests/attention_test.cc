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

#include "attention/state.h"
#include "attention_cases.h"
#include "common/f16.h"
#include "reference/attention_oracle.h"
#include "test_support.h"
#include "turbodecode/attention.h"
#include "turbodecode/error.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode {
namespace {

using testing::fresh_seed;

// Fills every row of a CPU cache with random contents: F16 rows ~ N(0, 1), TQ codes uniform
// over the codebook, norms of the size real rows of N(0, 1) values have. Fast enough for
// caches of tens of MB: values come from a table of Gaussians picked by a cheap generator.
void fill_random(const KvCacheView& cache, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint16_t> gaussians(4096);
  std::normal_distribution<float> normal;
  for (auto& g : gaussians) g = f32_to_f16(normal(rng));
  testing::fill_random_cache(cache, rng, [&] { return gaussians[rng() & 4095]; });
}

// Host tensors of one run_decode call: q, out (NaN-poisoned), indices and workspace.
struct DecodeCall {
  DecodeCall(const DecodePlan& plan, const std::vector<std::int32_t>& slots,
             const std::vector<std::int32_t>& positions, std::uint64_t seed,
             std::int64_t row_padding = 0)
      : n(static_cast<std::int64_t>(slots.size())),
        heads(plan.options.n_heads),
        dim(plan.cache.head_dim),
        padded_dim(dim + row_padding),
        q_values(testing::gaussian(static_cast<std::size_t>(n * heads * dim), seed)),
        q_buffer(Device::cpu, n * heads * padded_dim * 4),
        out_buffer(Device::cpu, n * heads * padded_dim * 4),
        slot_buffer(testing::to_device(Device::cpu, slots)),
        pos_buffer(testing::to_device(Device::cpu, positions)),
        workspace_buffer(Device::cpu, std::max<std::int64_t>(plan.workspace_bytes, 1)) {
    q_buffer.fill_bytes(0xFF);
    for (std::int64_t r = 0; r < n * heads; ++r) {
      std::memcpy(q_buffer.view(DType::f32, {n * heads, padded_dim}).as<float>() + r * padded_dim,
                  q_values.data() + r * dim, static_cast<std::size_t>(dim) * 4);
    }
    out_buffer.fill_bytes(0xFF);
  }

  TensorView rows(const Buffer& buffer) const {
    TensorView view = buffer.view(DType::f32, {n, heads, dim});
    view.strides = {heads * padded_dim, padded_dim, 1, 0};
    return view;
  }
  TensorView q() const { return rows(q_buffer); }
  TensorView out() const { return rows(out_buffer); }
  TensorView slot_ids() const { return slot_buffer.view(DType::i32, {n}); }
  TensorView seq_pos() const { return pos_buffer.view(DType::i32, {n}); }
  TensorView workspace() const {
    return workspace_buffer.view(DType::u8, {workspace_buffer.bytes()});
  }

  void run(const DecodePlan& plan, const KvCacheView& cache) const {
    run_decode(plan, cache, q(), slot_ids(), seq_pos(), out(), workspace());
  }
  // Output of query i (all heads, contiguous).
  std::vector<float> output(std::int64_t i) const {
    std::vector<float> values(static_cast<std::size_t>(heads * dim));
    const float* base = out().as<float>();
    for (std::int64_t h = 0; h < heads; ++h) {
      std::memcpy(values.data() + h * dim, base + (i * heads + h) * padded_dim,
                  static_cast<std::size_t>(dim) * 4);
    }
    return values;
  }
  bool out_untouched() const {
    const auto* bytes = static_cast<const std::uint8_t*>(out_buffer.data());
    return std::all_of(bytes, bytes + out_buffer.bytes(), [](std::uint8_t b) { return b == 0xFF; });
  }

  std::int64_t n, heads, dim, padded_dim;
  std::vector<float> q_values;
  Buffer q_buffer, out_buffer, slot_buffer, pos_buffer, workspace_buffer;
};

// ---------------------------------------------------------------------------------------------
// The matrix: every mask kind and ring state × V format × split count is run; head dim, K
// format, GQA ratio, softcap, rotated output, padded rows, window and lengths rotate through
// their values from a fixed design seed, while the data of every case is fresh.

enum class Visibility { causal, sliding_linear, ring_unwrapped, ring_wrapped };

struct MatrixCase {
  Visibility visibility;
  RowFormat v_format;
  int fixed_splits;
  int head_dim;
  RowFormat k_format;
  int group;
  int n_kv_heads;
  bool softcap;
  bool rotated_output;
  float scale;              // 0 (1/√D), or as Gemma passes it
  float scale_factor_d512;  // `sf` of SPEC §1.2
  std::int64_t row_padding;
  std::int64_t capacity;
  std::int64_t window;
  std::vector<std::int32_t> positions;  // one query per slot

  std::string describe() const {
    static const char* kVisibility[] = {"causal", "sliding_linear", "ring", "ring_wrapped"};
    std::string s =
        std::string(kVisibility[static_cast<int>(visibility)]) + " D=" + std::to_string(head_dim) +
        " K=" + format_name(k_format) + " V=" + format_name(v_format) +
        " group=" + std::to_string(group) + " kv_heads=" + std::to_string(n_kv_heads) +
        " splits=" + std::to_string(fixed_splits) + " softcap=" + std::to_string(softcap) +
        " rotated=" + std::to_string(rotated_output) + " scale=" + std::to_string(scale) +
        " sf=" + std::to_string(scale_factor_d512) + " cap=" + std::to_string(capacity) +
        " window=" + std::to_string(window) + " pos=";
    for (auto p : positions) s += std::to_string(p) + ",";
    return s;
  }
};

// Lengths the matrix draws from: 1 (splits that see nothing), tile and split edges, long ones.
constexpr std::int32_t kLengths[] = {1,   2,    17,   32,   33,   100,  511,
                                     513, 1024, 1500, 2047, 3000, 4097, 5000};

std::vector<MatrixCase> matrix_cases() {
  std::mt19937 design(20261129);  // fixed: the design is reproducible, the data is not
  const auto pick = [&](auto const& values) { return values[design() % std::size(values)]; };
  const RowFormat v_formats[] = {RowFormat::tq4, RowFormat::tq5, RowFormat::tq6, RowFormat::tq8,
                                 RowFormat::f16};
  const int splits[] = {1, 3, 32, 0};
  std::vector<MatrixCase> cases;
  for (int round = 0; round < 2; ++round) {  // two draws of the rotating dimensions
    for (int vis = 0; vis < 4; ++vis) {
      for (RowFormat v : v_formats) {
        for (int s : splits) {
          MatrixCase c{static_cast<Visibility>(vis),
                       v,
                       s,
                       0,
                       {},
                       0,
                       0,
                       false,
                       false,
                       0.0f,
                       1.0f,
                       0,
                       0,
                       0,
                       {}};
          c.head_dim = pick(std::array{256, 512});
          c.k_format = pick(std::array{RowFormat::f16, RowFormat::f16, RowFormat::tq8,
                                       RowFormat::tq4, RowFormat::tq5, RowFormat::tq6});
          c.group = pick(std::array{1, 2, 4, 8, 16});
          c.n_kv_heads = pick(std::array{1, 2});
          c.softcap = design() % 2;
          c.rotated_output = design() % 2;
          c.scale = pick(std::array{0.0f, 0.0f, 1.0f, 0.03f});
          c.scale_factor_d512 = pick(std::array{1.0f, 2.5f});
          c.row_padding = pick(std::array{0, 0, 32});
          const bool ring = vis >= 2;
          c.capacity = ring ? pick(std::array{64, 1000, 4096}) : 5000;
          c.window = vis == 0 ? 0 : pick(std::array<std::int64_t, 4>{0, 1, 100, 700});
          for (int q = 0; q < 3; ++q) {
            std::int32_t len = pick(kLengths);
            if (vis == 2) len = 1 + len % static_cast<std::int32_t>(c.capacity - 1);  // never fills
            if (vis == 3) len = static_cast<std::int32_t>(c.capacity) + len;          // wrapped
            c.positions.push_back(len - 1);
          }
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

// Runs one case of the matrix on fresh data; returns the worst relative L2 error of its rows.
double check_matrix_case(const MatrixCase& mc) {
  double worst = 0.0;
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(mc.describe() + " seed=" + std::to_string(seed));
  const bool ring = mc.visibility >= Visibility::ring_unwrapped;
  KvCacheConfig config{static_cast<std::int64_t>(mc.positions.size()),
                       mc.n_kv_heads,
                       mc.capacity,
                       mc.head_dim,
                       ring ? LayerKind::ring : LayerKind::linear,
                       mc.k_format,
                       mc.v_format,
                       mc.scale_factor_d512,
                       Device::cpu};
  KvCache cache(config);
  fill_random(cache.view(), seed);
  DecodeOptions options;
  options.n_heads = mc.group * mc.n_kv_heads;
  options.mask = mc.visibility == Visibility::causal           ? MaskKind::causal
                 : mc.visibility == Visibility::sliding_linear ? MaskKind::sliding_linear
                                                               : MaskKind::sliding_ring;
  options.sliding_window = mc.window;
  options.softcap = mc.softcap ? 2.5f : 0.0f;
  options.scale = mc.scale;
  options.rotated_output = mc.rotated_output;
  options.fixed_splits = mc.fixed_splits;
  const DecodePlan plan = plan_decode(config, options, 4);
  std::vector<std::int32_t> slots(mc.positions.size());
  for (std::size_t i = 0; i < slots.size(); ++i)
    slots[i] = static_cast<std::int32_t>(slots.size() - 1 - i);
  const DecodeCall call(plan, slots, mc.positions, seed + 1, mc.row_padding);
  call.run(plan, cache.view());
  const std::vector<double> expected =
      oracle::decode_attention(cache.view(), options, call.q_values, slots, mc.positions);
  const std::size_t row = static_cast<std::size_t>(call.heads * call.dim);
  for (std::int64_t i = 0; i < call.n; ++i) {
    const std::vector<double> want(expected.begin() + static_cast<std::ptrdiff_t>(i * row),
                                   expected.begin() + static_cast<std::ptrdiff_t>((i + 1) * row));
    const double error = testing::relative_l2(call.output(i), want);
    EXPECT_LE(error, 2e-3) << "query " << i;
    worst = std::max(worst, error);
  }
  return worst;
}

TEST(DecodeAttention, MatchesOracleOverTheMatrix) {
  const std::vector<MatrixCase> cases = matrix_cases();
  double worst = 0.0;
  for (const MatrixCase& mc : cases) worst = std::max(worst, check_matrix_case(mc));
  std::printf("[ matrix ] %zu cases, %zu query rows, worst relative L2 %.3g\n", cases.size(),
              cases.size() * 3, worst);
}

// The CPU backend dispatches to the best SIMD target at run time; every other target it has
// for this CPU runs every seventh case of the matrix (all formats, head dims and group sizes
// appear among them).
TEST(DecodeAttention, MatchesOracleOnEverySimdTarget) {
  const std::vector<MatrixCase> cases = matrix_cases();
  testing::for_each_simd_target([&] {
    for (std::size_t i = 0; i < cases.size(); i += 7) check_matrix_case(cases[i]);
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

TEST(DecodeAttention, PlanRejectsBadOptions) {
  const KvCacheConfig linear{
      2, 2, 128, 256, LayerKind::linear, RowFormat::f16, RowFormat::tq8, 1.0f, Device::cpu};
  KvCacheConfig ring = linear;
  ring.kind = LayerKind::ring;
  DecodeOptions good;
  good.n_heads = 4;
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
  expect_rejected("options.fixed_splits",
                  [&] { plan_decode(linear, with([](auto& o) { o.fixed_splits = -1; }), 1); });
  expect_rejected("max_queries", [&] { plan_decode(linear, good, 0); });
  KvCacheConfig bad_dim = linear;
  bad_dim.head_dim = 128;
  expect_rejected("head_dim", [&] { plan_decode(bad_dim, good, 1); });

  const DecodePlan plan = plan_decode(linear, with([](auto& o) { o.fixed_splits = 5; }), 3);
  EXPECT_GE(plan.max_splits, 5);
  EXPECT_EQ(plan.splits_for_length(1), 5);
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

}  // namespace
}  // namespace turbodecode
