// Decode attention on the CPU backend against the double-precision oracle (SPEC §2, §5, §7).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "attention/state.h"
#include "common/f16.h"
#include "oracle/attention_oracle.h"
#include "test_support.h"
#include "turbodecode/attention.h"
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
  const KvCacheConfig& c = cache.config;
  const auto fill_side = [&](RowFormat format, const TensorView& rows, const TensorView& norms) {
    const std::int64_t n = rows.numel();
    if (format == RowFormat::f16) {
      auto* data = rows.as<std::uint16_t>();
      for (std::int64_t i = 0; i < n; ++i) data[i] = gaussians[rng() & 4095];
      return;
    }
    const int bits = format_bits(format);
    const std::uint64_t mask = bits == 4 ? 0xff : (1u << bits) - 1;
    auto* codes = rows.as<std::uint8_t>();
    for (std::int64_t i = 0; i < n; ++i) codes[i] = static_cast<std::uint8_t>(rng() & mask);
    // D = 256 stores ‖y‖ (≈ 16 for N(0,1) rows), D = 512 the RMS of each half (≈ 1).
    std::uniform_real_distribution<float> norm(c.head_dim == 256 ? 8.0f : 0.5f,
                                               c.head_dim == 256 ? 24.0f : 1.5f);
    auto* values = norms.as<float>();
    for (std::int64_t i = 0; i < norms.numel(); ++i) values[i] = norm(rng);
  };
  fill_side(c.k_format, cache.k, cache.k_norms);
  fill_side(c.v_format, cache.v, cache.v_norms);
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
        " rotated=" + std::to_string(rotated_output) + " cap=" + std::to_string(capacity) +
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
  for (int vis = 0; vis < 4; ++vis) {
    for (RowFormat v : v_formats) {
      for (int s : splits) {
        MatrixCase c{static_cast<Visibility>(vis), v, s, 0, {}, 0, 0, false, false, 0, 0, 0, {}};
        c.head_dim = pick(std::array{256, 512});
        c.k_format = pick(std::array{RowFormat::f16, RowFormat::tq8, RowFormat::tq4});
        c.group = pick(std::array{1, 2, 8});
        c.n_kv_heads = pick(std::array{1, 2});
        c.softcap = design() % 2;
        c.rotated_output = design() % 2;
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
  return cases;
}

TEST(DecodeAttention, MatchesOracleOverTheMatrix) {
  const std::vector<MatrixCase> cases = matrix_cases();
  double worst = 0.0;
  for (const MatrixCase& mc : cases) {
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
                         1.0f,
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
  }
  std::printf("[ matrix ] %zu cases, %zu query rows, worst relative L2 %.3g\n", cases.size(),
              cases.size() * 3, worst);
}

}  // namespace
}  // namespace turbodecode
