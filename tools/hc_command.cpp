// `turbodecode hc`: one DeepSeek-V4 layer's hyper-connection chain with random weights —
// attention HC-pre, HC-post, FFN HC-pre, HC-post with the Q8_0 shared-expert down matvec —
// on the chosen device, checked against the double-precision oracle and timed.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "argument_check.h"
#include "commands.h"
#include "device_tensor.h"
#include "global_options.h"
#include "reference/hc_oracle.h"
#include "turbodecode/buffer.h"
#include "turbodecode/f16.h"
#include "turbodecode/hc.h"
#include "turbodecode/q8.h"

namespace turbodecode::cli {
namespace {

struct HcOptions {
  int n_hc = 4;
  std::int64_t embd = 4096;
  std::int64_t rows = 1;
  std::int64_t shared_width = 2048;
  int repeats = 50;
};

std::vector<float> normal(std::size_t n, std::mt19937_64& rng, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Weights of one HC-pre (norm-mix matrix, split scale/base, RMSNorm weight), host and device.
struct PreWeights {
  std::vector<std::uint16_t> mix_weight;
  std::vector<float> scale, base, norm_weight;
  DeviceTensor mix_weight_d, scale_d, base_d, norm_weight_d;
  PreWeights(Device device, const HcParams& p, std::mt19937_64& rng)
      : mix_weight(make_f16(
            normal(static_cast<std::size_t>(hc_mix_width(p.n_hc) * p.n_hc * p.embd), rng, 0.02f))),
        scale(normal(3, rng, 0.5f)),
        base(normal(static_cast<std::size_t>(hc_mix_width(p.n_hc)), rng, 0.5f)),
        norm_weight(normal(static_cast<std::size_t>(p.embd), rng, 1.0f)),
        mix_weight_d(device, DType::f16, {hc_mix_width(p.n_hc), p.n_hc * p.embd}, mix_weight),
        scale_d(device, DType::f32, {3}, scale),
        base_d(device, DType::f32, {hc_mix_width(p.n_hc)}, base),
        norm_weight_d(device, DType::f32, {p.embd}, norm_weight) {}
  static std::vector<std::uint16_t> make_f16(const std::vector<float>& v) {
    std::vector<std::uint16_t> out(v.size());
    std::transform(v.begin(), v.end(), out.begin(), f32_to_f16);
    return out;
  }
};

// Outputs of one HC-pre.
struct PreOutputs {
  int n_hc;
  DeviceTensor mix, split, collapsed, normed;
  PreOutputs(Device device, const HcParams& p, std::int64_t rows)
      : n_hc(p.n_hc),
        mix(device, DType::f32, {rows, hc_mix_width(p.n_hc)}),
        split(device, DType::f32, {rows, hc_mix_width(p.n_hc)}),
        collapsed(device, DType::f32, {rows, p.embd}),
        normed(device, DType::f32, {rows, p.embd}) {}
  // post [T, n] and comb [T, n, n], views into the split rows.
  TensorView post() const {
    TensorView v = split.view();
    v.data = v.as<float>() + n_hc;
    v.shape = {v.shape[0], n_hc, 0, 0};
    return v;
  }
  TensorView comb() const {
    TensorView v = split.view();
    v.data = v.as<float>() + 2 * n_hc;
    v.rank = 3;
    v.shape = {v.shape[0], n_hc, n_hc, 0};
    v.strides = {v.strides[0], n_hc, 1, 0};
    return v;
  }
};

// The layer: inputs, weights and every intermediate, plus the run of its four HC steps.
struct Layer {
  HcParams params;
  std::int64_t rows;
  HcPrePlan plan;
  std::vector<float> x, attn_out, routed, hidden;
  std::vector<std::uint8_t> shared_q8;
  PreWeights attn, ffn;
  DeviceTensor workspace, x_d, attn_out_d, routed_d, hidden_d, shared_q8_d, x_mid_d, shared_d,
      x_out_d;
  PreOutputs attn_pre, ffn_pre;

  Layer(Device device, const HcOptions& o, std::mt19937_64& rng)
      : params{o.n_hc, o.embd},
        rows(o.rows),
        plan(plan_hc_pre(params, o.rows, device)),
        x(normal(static_cast<std::size_t>(o.rows * o.n_hc * o.embd), rng, 1.0f)),
        attn_out(normal(static_cast<std::size_t>(o.rows * o.embd), rng, 1.0f)),
        routed(normal(static_cast<std::size_t>(o.rows * o.embd), rng, 1.0f)),
        hidden(normal(static_cast<std::size_t>(o.rows * o.shared_width), rng, 1.0f)),
        shared_q8(quantized(normal(static_cast<std::size_t>(o.embd * o.shared_width), rng, 0.02f),
                            o.embd, o.shared_width)),
        attn(device, params, rng),
        ffn(device, params, rng),
        workspace(device, DType::u8, {std::max<std::int64_t>(plan.workspace_bytes, 16)},
                  std::vector<std::uint8_t>(std::max<std::size_t>(plan.workspace_bytes, 16), 0)),
        x_d(device, DType::f32, {o.rows, o.n_hc, o.embd}, x),
        attn_out_d(device, DType::f32, {o.rows, o.embd}, attn_out),
        routed_d(device, DType::f32, {o.rows, o.embd}, routed),
        hidden_d(device, DType::f32, {o.rows, o.shared_width}, hidden),
        shared_q8_d(device, DType::u8, {o.embd, q8_row_bytes(o.shared_width)}, shared_q8),
        x_mid_d(device, DType::f32, {o.rows, o.n_hc, o.embd}),
        shared_d(device, DType::f32, {o.rows, o.embd}),
        x_out_d(device, DType::f32, {o.rows, o.n_hc, o.embd}),
        attn_pre(device, params, o.rows),
        ffn_pre(device, params, o.rows) {}

  static std::vector<std::uint8_t> quantized(std::vector<float> values, std::int64_t rows,
                                             std::int64_t cols) {
    std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * q8_row_bytes(cols)));
    quantize_q8_0(TensorView::contiguous(values.data(), DType::f32, {rows, cols}),
                  TensorView::contiguous(q.data(), DType::u8, {rows, q8_row_bytes(cols)}));
    return q;
  }

  void pre(const PreWeights& w, const DeviceTensor& state, const PreOutputs& out) const {
    hc_pre(plan, state.view(), w.mix_weight_d.view(), w.scale_d.view(), w.base_d.view(),
           w.norm_weight_d.view(), out.mix.view(), out.split.view(), out.collapsed.view(),
           out.normed.view(), workspace.view());
  }
  void attention_post() const {
    hc_expand(params, attn_out_d.view(), {}, x_d.view(), attn_pre.post(), attn_pre.comb(),
              x_mid_d.view());
  }
  void ffn_post() const {
    hc_expand_shared_q8(params, shared_q8_d.view(), hidden_d.view(), routed_d.view(),
                        shared_d.view(), x_mid_d.view(), ffn_pre.post(), ffn_pre.comb(),
                        x_out_d.view());
  }
  void run() const {
    pre(attn, x_d, attn_pre);
    attention_post();
    pre(ffn, x_mid_d, ffn_pre);
    ffn_post();
  }
};

// The layer's chain in double precision for row t; returns {attention normed, state after
// attention, FFN normed, final state}.
std::array<std::vector<double>, 4> oracle_row(const Layer& l, std::int64_t t,
                                              const std::vector<double>& shared_weight,
                                              std::int64_t shared_width) {
  const HcParams& p = l.params;
  const std::int64_t e = p.embd;
  const int n = p.n_hc;
  const auto slice = [](const std::vector<float>& v, std::int64_t begin, std::int64_t count) {
    return std::vector<double>(v.begin() + begin, v.begin() + begin + count);
  };
  const auto pre = [&](const PreWeights& w, const std::vector<double>& state) {
    std::vector<double> weight(w.mix_weight.size());
    std::transform(w.mix_weight.begin(), w.mix_weight.end(), weight.begin(), f16_to_f32);
    const auto mix = oracle::hc_norm_mix(state, weight, hc_mix_width(n), p.norm_eps);
    auto split = oracle::hc_split(mix, slice(w.scale, 0, 3), slice(w.base, 0, hc_mix_width(n)), n,
                                  p.sinkhorn_iters, p.eps);
    const auto u = oracle::hc_collapse(state, {split.data(), static_cast<std::size_t>(n)}, n, e);
    return std::pair{split, oracle::hc_rms_norm(u, slice(w.norm_weight, 0, e), p.norm_eps)};
  };
  const auto x = slice(l.x, t * n * e, n * e);
  const auto [split_a, normed_a] = pre(l.attn, x);
  const std::span<const double> sa(split_a);
  const auto x_mid = oracle::hc_expand(slice(l.attn_out, t * e, e), {}, x, sa.subspan(n, n),
                                       sa.subspan(2 * n, n * n), n, e);
  const auto [split_f, normed_f] = pre(l.ffn, x_mid);
  const std::span<const double> sf(split_f);
  const auto shared = oracle::matvec(shared_weight, slice(l.hidden, t * shared_width, shared_width),
                                     e, shared_width);
  const auto x_out = oracle::hc_expand(slice(l.routed, t * e, e), shared, x_mid, sf.subspan(n, n),
                                       sf.subspan(2 * n, n * n), n, e);
  return {normed_a, x_mid, normed_f, x_out};
}

// Relative L2 error of the first `rows` rows of each checked output against the oracle.
std::array<double, 4> agreement(const Layer& l, std::int64_t rows, std::int64_t shared_width) {
  const auto shared_weight = oracle::q8_dequantize(l.shared_q8.data(), l.params.embd, shared_width,
                                                   q8_row_bytes(shared_width));
  const std::array<std::vector<float>, 4> got = {
      l.attn_pre.normed.to_host_values<float>(), l.x_mid_d.to_host_values<float>(),
      l.ffn_pre.normed.to_host_values<float>(), l.x_out_d.to_host_values<float>()};
  std::array<double, 4> num{}, den{};
  for (std::int64_t t = 0; t < rows; ++t) {
    const auto want = oracle_row(l, t, shared_weight, shared_width);
    for (int k = 0; k < 4; ++k) {
      const std::size_t width = want[k].size();
      for (std::size_t i = 0; i < width; ++i) {
        const double g = got[k][t * width + i];
        const double d = std::isfinite(g) ? g - want[k][i] : 1e300;
        num[k] += d * d;
        den[k] += want[k][i] * want[k][i];
      }
    }
  }
  std::array<double, 4> rel{};
  for (int k = 0; k < 4; ++k) rel[k] = std::sqrt(num[k] / den[k]);
  return rel;
}

// Wall-clock microseconds per call of `step`, over `repeats` calls after a warm-up.
template <class Step>
double time_us(int repeats, Step step) {
  step();
  synchronize();
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) step();
  synchronize();
  const std::chrono::duration<double, std::micro> elapsed =
      std::chrono::steady_clock::now() - begin;
  return elapsed.count() / repeats;
}

// SPEC §7.1: the flags size every tensor of the layer; each stays within 2^26 values.
constexpr std::int64_t kMaxTensorValues = std::int64_t{1} << 26;

void check_sizes(const HcOptions& o) {
  check_arg(o.shared_width % kQ8BlockValues == 0, "--shared-width",
            "must be a multiple of 32 (whole Q8_0 blocks), not " + std::to_string(o.shared_width));
  check_arg(product_at_most({o.rows, o.n_hc, o.embd}, kMaxTensorValues), "--rows",
            "the HC state of --rows x --n-hc x --embd values may hold at most 2^26 values");
  check_arg(product_at_most({hc_mix_width(o.n_hc), o.n_hc, o.embd}, kMaxTensorValues), "--embd",
            "the mix matrix of M x --n-hc x --embd values may hold at most 2^26 values");
  check_arg(product_at_most({o.embd, o.shared_width}, kMaxTensorValues), "--shared-width",
            "the shared-expert matrix of --embd x --shared-width values may hold at most 2^26 "
            "values");
  check_arg(product_at_most({o.rows, o.shared_width}, kMaxTensorValues), "--rows",
            "the shared-expert input of --rows x --shared-width values may hold at most 2^26 "
            "values");
}

void run_hc(const HcOptions& o) {
  const GlobalOptions& g = global_options();
  check_sizes(o);
  std::mt19937_64 rng(g.seed);
  const Layer layer(g.device, o, rng);
  layer.run();
  synchronize();
  const std::int64_t checked_rows = std::min<std::int64_t>(o.rows, 8);
  const auto rel = agreement(layer, checked_rows, o.shared_width);
  const std::array<std::pair<const char*, double>, 5> timings = {{
      {"attention HC-pre",
       time_us(o.repeats, [&] { layer.pre(layer.attn, layer.x_d, layer.attn_pre); })},
      {"attention HC-post (expand)", time_us(o.repeats, [&] { layer.attention_post(); })},
      {"FFN HC-pre",
       time_us(o.repeats, [&] { layer.pre(layer.ffn, layer.x_mid_d, layer.ffn_pre); })},
      {"FFN HC-post (Q8_0 shared + expand)", time_us(o.repeats, [&] { layer.ffn_post(); })},
      {"layer (all four)", time_us(o.repeats, [&] { layer.run(); })},
  }};
  const char* names[] = {"attention normed", "state after attention", "FFN normed",
                         "state after FFN"};
  if (g.json) {
    nlohmann::ordered_json json = {{"device", device_name(g.device)},
                                   {"n_hc", o.n_hc},
                                   {"embd", o.embd},
                                   {"rows", o.rows},
                                   {"shared_width", o.shared_width},
                                   {"checked_rows", checked_rows}};
    for (int k = 0; k < 4; ++k) json["relative_l2"][names[k]] = rel[k];
    for (const auto& [name, us] : timings) json["us_per_call"][name] = us;
    fmt::print("{}\n", json.dump(2));
    return;
  }
  fmt::print("DeepSeek-V4 HC chain on {}: n_hc {}, E {}, T {}, shared expert {} -> {} (Q8_0)\n",
             device_name(g.device), o.n_hc, o.embd, o.rows, o.shared_width, o.embd);
  fmt::print("agreement with the double-precision oracle ({} row(s), relative L2):\n",
             checked_rows);
  for (int k = 0; k < 4; ++k) fmt::print("  {:<24} {:.3e}\n", names[k], rel[k]);
  fmt::print("wall-clock per call ({} calls{}):\n", o.repeats,
             g.device == Device::cuda ? ", eager launches" : "");
  for (const auto& [name, us] : timings) fmt::print("  {:<36} {:>10.2f} us\n", name, us);
}

}  // namespace

Command register_hc_command(CLI::App& app) {
  auto options = std::make_shared<HcOptions>();
  CLI::App* cmd = add_command(
      app, "hc",
      "Run one DeepSeek-V4 layer's hyper-connection chain (attention HC-pre, HC-post, FFN "
      "HC-pre, HC-post with a Q8_0 shared-expert matvec) on random weights; print agreement "
      "with the double-precision oracle and timings. Every tensor of the layer holds at most "
      "2^26 values");
  cmd->add_option("--n-hc", options->n_hc, "HC streams")
      ->check(CLI::Range(1, kMaxHcStreams))
      ->capture_default_str();
  cmd->add_option("--embd", options->embd, "stream width E")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("--rows,-T", options->rows, "token rows T (1 = decode)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("--shared-width", options->shared_width,
                  "shared-expert hidden width (Q8_0 matvec input, multiple of 32)")
      ->check(CLI::Range(std::int64_t{32}, std::int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("--repeats", options->repeats, "timed calls per step")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  return {cmd, [options] { run_hc(*options); }};
}

}  // namespace turbodecode::cli
