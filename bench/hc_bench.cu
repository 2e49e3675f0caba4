// DeepSeek-V4 hyper-connection operators on the GPU (SPEC §3, §6): every op and one layer's
// HC chain at E 4096, n_hc 4, M 24, T ∈ {1, 32, 512}, timed eagerly and replayed from a CUDA
// graph (median µs per call), with the bytes each must move, as GB/s and as a fraction of the
// read-stream bandwidth measured in the same run. Inputs rotate among enough copies to exceed
// the L2. docs/hc.md describes the runs and the PyTorch peer (bench/peers/hc_torch.py).
//   hc_bench [--quick] [--rows T] [--op NAME_PART] [--json PATH]   (--rows: one T, any; --op: the
//   ops whose name contains NAME_PART)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_timing.cuh"
#include "turbodecode/buffer.h"
#include "turbodecode/hc.h"
#include "turbodecode/q8.h"

namespace turbodecode::bench {
namespace {

using nlohmann::json;

constexpr int kStreams = 4;
constexpr std::int64_t kEmbd = 4096;
constexpr int kMix = hc_mix_width(kStreams);
constexpr std::int64_t kSharedWidth = 2048;  // Q8_0 matvec 2048 -> 4096
constexpr std::int64_t kRotationBytes = std::int64_t{200} << 20;
constexpr int kMaxRotation = 16;

struct Settings {
  bool quick = false;
  int warmup = 5;
  int reps = 30;
  int graph_calls = 16;
  std::int64_t bandwidth_bytes = std::int64_t{2} << 30;
  std::int64_t only_rows = 0;  // > 0: run only this T, any T (profiling, launch thresholds)
  std::string only_op;         // run only the ops whose name contains this (for profiling)
};

TensorView view(const Buffer& b, DType dtype, std::initializer_list<std::int64_t> shape) {
  return b.view(dtype, shape);
}

// post [T, n] / comb [T, n, n] inside split rows [T, M].
TensorView post_of(const Buffer& split, std::int64_t rows) {
  TensorView v = split.view(DType::f32, {rows, kStreams});
  v.data = static_cast<float*>(split.data()) + kStreams;
  v.strides = {kMix, 1, 0, 0};
  return v;
}
TensorView comb_of(const Buffer& split, std::int64_t rows) {
  TensorView v = split.view(DType::f32, {rows, kStreams, kStreams});
  v.data = static_cast<float*>(split.data()) + 2 * kStreams;
  v.strides = {kMix, kStreams, 1, 0};
  return v;
}

// Outputs of one HC-pre.
struct PreOut {
  Buffer mix, split, collapsed, normed;
  explicit PreOut(std::int64_t t)
      : mix(Device::cuda, t * kMix * 4),
        split(Device::cuda, t * kMix * 4),
        collapsed(Device::cuda, t * kEmbd * 4),
        normed(Device::cuda, t * kEmbd * 4) {}
};

// One rotation set: every input and output a layer's HC work touches at T rows.
struct CallSet {
  std::int64_t t;
  Buffer x, x_mid, x_out, attn_out, routed, hidden, shared, mix_weight, q8, workspace;
  PreOut attn, ffn;
  CallSet(std::int64_t rows, const HcPrePlan& plan, const std::vector<std::uint8_t>& q8_host,
          unsigned long long seed, cudaStream_t s)
      : t(rows),
        x(Device::cuda, rows * kStreams * kEmbd * 4),
        x_mid(Device::cuda, rows * kStreams * kEmbd * 4),
        x_out(Device::cuda, rows * kStreams * kEmbd * 4),
        attn_out(Device::cuda, rows * kEmbd * 4),
        routed(Device::cuda, rows * kEmbd * 4),
        hidden(Device::cuda, rows * kSharedWidth * 4),
        shared(Device::cuda, rows * kEmbd * 4),
        mix_weight(Device::cuda, kMix * kStreams * kEmbd * 2),
        q8(Device::cuda, static_cast<std::int64_t>(q8_host.size())),
        workspace(Device::cuda, std::max<std::int64_t>(plan.workspace_bytes, 16)),
        attn(rows),
        ffn(rows) {
    fill_uniform(x.data(), DType::f32, rows * kStreams * kEmbd, seed, s);
    fill_uniform(attn_out.data(), DType::f32, rows * kEmbd, seed + 1, s);
    fill_uniform(routed.data(), DType::f32, rows * kEmbd, seed + 2, s);
    fill_uniform(hidden.data(), DType::f32, rows * kSharedWidth, seed + 3, s);
    fill_uniform(mix_weight.data(), DType::f16, kMix * kStreams * kEmbd, seed + 4, s);
    q8.copy_from_host(q8_host.data(), static_cast<std::int64_t>(q8_host.size()));
    workspace.fill_bytes(0);
  }
  TensorView state(const Buffer& b) const { return view(b, DType::f32, {t, kStreams, kEmbd}); }
  TensorView rows(const Buffer& b, std::int64_t width = kEmbd) const {
    return view(b, DType::f32, {t, width});
  }
};

// Parameters shared by all sets.
struct Shared {
  HcParams params{kStreams, kEmbd};
  Buffer scale{Device::cuda, 3 * 4}, base{Device::cuda, kMix * 4},
      norm_weight{Device::cuda, kEmbd * 4};
  int read_blocks = read_stream_blocks(cuda_sm_count());
  Buffer read_sink{Device::cuda, 4 * read_blocks};
  explicit Shared(cudaStream_t s) {
    const float scales[3] = {0.5f, 0.5f, 0.5f};
    scale.copy_from_host(scales, sizeof scales);
    fill_uniform(base.data(), DType::f32, kMix, 7, s);
    fill_uniform(norm_weight.data(), DType::f32, kEmbd, 8, s);
  }
};

std::vector<std::uint8_t> random_q8(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(kEmbd * kSharedWidth));
  for (auto& v : w) v = dist(rng);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(kEmbd * q8_row_bytes(kSharedWidth)));
  quantize_q8_0(TensorView::contiguous(w.data(), DType::f32, {kEmbd, kSharedWidth}),
                TensorView::contiguous(q.data(), DType::u8, {kEmbd, q8_row_bytes(kSharedWidth)}));
  return q;
}

struct Op {
  std::string name;
  std::int64_t bytes;
  std::function<void(const CallSet&, Stream)> launch;
};

// Bytes of the f32 activations, the F16 mix matrix and the Q8_0 weights at T rows.
struct Bytes {
  std::int64_t state, row, mixes, mix_weight, q8, hidden;
  explicit Bytes(std::int64_t t)
      : state(t * kStreams * kEmbd * 4),
        row(t * kEmbd * 4),
        mixes(t * kMix * 4),
        mix_weight(kMix * kStreams * kEmbd * 2),
        q8(kEmbd * q8_row_bytes(kSharedWidth)),
        hidden(t * kSharedWidth * 4) {}
  std::int64_t pre() const { return state + mix_weight + 2 * mixes + 2 * row; }
  std::int64_t expand() const { return row + 2 * state; }
  std::int64_t ffn_post() const { return q8 + hidden + 3 * row + 2 * state; }
};

TensorView mix_weight_of(const CallSet& c) {
  return view(c.mix_weight, DType::f16, {kMix, kStreams * kEmbd});
}
TensorView workspace_of(const CallSet& c) {
  return view(c.workspace, DType::u8, {c.workspace.bytes()});
}
TensorView q8_of(const CallSet& c) {
  return view(c.q8, DType::u8, {kEmbd, q8_row_bytes(kSharedWidth)});
}

void run_pre(const Shared& sh, const HcPrePlan& plan, const CallSet& c, const Buffer& x,
             const PreOut& o, Stream s) {
  hc_pre(plan, c.state(x), mix_weight_of(c), view(sh.scale, DType::f32, {3}),
         view(sh.base, DType::f32, {kMix}), view(sh.norm_weight, DType::f32, {kEmbd}),
         c.rows(o.mix, kMix), c.rows(o.split, kMix), c.rows(o.collapsed), c.rows(o.normed),
         workspace_of(c), s);
}

void run_expand(const Shared& sh, const CallSet& c, bool with_add, Stream s) {
  hc_expand(sh.params, c.rows(c.attn_out), with_add ? c.rows(c.routed) : TensorView{}, c.state(c.x),
            post_of(c.attn.split, c.t), comb_of(c.attn.split, c.t), c.state(c.x_mid), s);
}

void run_ffn_post(const Shared& sh, const CallSet& c, Stream s) {
  hc_expand_shared_q8(sh.params, q8_of(c), c.rows(c.hidden, kSharedWidth), c.rows(c.routed),
                      c.rows(c.shared), c.state(c.x_mid), post_of(c.ffn.split, c.t),
                      comb_of(c.ffn.split, c.t), c.state(c.x_out), s);
}

// The HC-pre family and expand.
std::vector<Op> hc_ops(const Shared& sh, const HcPrePlan& plan, const Bytes& b) {
  return {
      {"norm_mix", b.state + b.mix_weight + b.mixes,
       [plan](const CallSet& c, Stream s) {
         hc_norm_mix(plan, c.state(c.x), mix_weight_of(c), c.rows(c.attn.mix, kMix),
                     workspace_of(c), s);
       }},
      {"split", 2 * b.mixes,
       [&sh](const CallSet& c, Stream s) {
         hc_split(sh.params, c.rows(c.attn.mix, kMix), view(sh.scale, DType::f32, {3}),
                  view(sh.base, DType::f32, {kMix}), c.rows(c.attn.split, kMix), s);
       }},
      {"collapse", b.state + b.row,
       [&sh](const CallSet& c, Stream s) {
         TensorView pre = post_of(c.attn.split, c.t);
         pre.data = c.attn.split.data();
         hc_collapse(sh.params, c.state(c.x), pre, c.rows(c.attn.collapsed), s);
       }},
      {"split_collapse_norm", b.state + 2 * b.mixes + 2 * b.row,
       [&sh](const CallSet& c, Stream s) {
         hc_split_collapse_norm(sh.params, c.rows(c.attn.mix, kMix),
                                view(sh.scale, DType::f32, {3}), view(sh.base, DType::f32, {kMix}),
                                c.state(c.x), view(sh.norm_weight, DType::f32, {kEmbd}),
                                c.rows(c.ffn.split, kMix), c.rows(c.attn.collapsed),
                                c.rows(c.attn.normed), s);
       }},
      {"hc_pre (one launch)", b.pre(),
       [&sh, plan](const CallSet& c, Stream s) { run_pre(sh, plan, c, c.x, c.attn, s); }},
      {"expand", b.expand(), [&sh](const CallSet& c, Stream s) { run_expand(sh, c, false, s); }},
      {"expand + add", b.expand() + b.row,
       [&sh](const CallSet& c, Stream s) { run_expand(sh, c, true, s); }},
  };
}

// The Q8_0 matvec, its expand fusions and the whole layer (the last op). First the bandwidth
// kernel reading the same Q8_0 weight bytes: what a launch that only streams them takes.
std::vector<Op> q8_and_layer_ops(const Shared& sh, const HcPrePlan& plan, const Bytes& b) {
  return {
      {"read-stream of the Q8_0 weights", b.q8,
       [&sh](const CallSet& c, Stream s) {
         launch_read_stream(c.q8.data(), c.q8.bytes(), static_cast<unsigned*>(sh.read_sink.data()),
                            sh.read_blocks, static_cast<cudaStream_t>(s.handle));
       }},
      {"q8_matvec 2048->4096", b.q8 + b.hidden + b.row,
       [](const CallSet& c, Stream s) {
         q8_matvec(q8_of(c), c.rows(c.hidden, kSharedWidth), c.rows(c.shared), s);
       }},
      {"q8 + expand (attention out)", b.q8 + b.hidden + b.expand(),
       [&sh](const CallSet& c, Stream s) {
         hc_expand_q8(sh.params, q8_of(c), c.rows(c.hidden, kSharedWidth), c.rows(c.attn_out),
                      c.state(c.x), post_of(c.attn.split, c.t), comb_of(c.attn.split, c.t),
                      c.state(c.x_mid), s);
       }},
      {"q8 shared + expand (FFN out)", b.ffn_post(),
       [&sh](const CallSet& c, Stream s) { run_ffn_post(sh, c, s); }},
      {"layer (pre, expand, pre, q8 shared + expand)", 2 * b.pre() + b.expand() + b.ffn_post(),
       [&sh, plan](const CallSet& c, Stream s) {
         run_pre(sh, plan, c, c.x, c.attn, s);
         run_expand(sh, c, false, s);
         run_pre(sh, plan, c, c.x_mid, c.ffn, s);
         run_ffn_post(sh, c, s);
       }},
  };
}

std::vector<Op> make_ops(const Shared& sh, const HcPrePlan& plan, std::int64_t t) {
  const Bytes bytes(t);
  std::vector<Op> ops = hc_ops(sh, plan, bytes);
  for (Op& op : q8_and_layer_ops(sh, plan, bytes)) ops.push_back(std::move(op));
  return ops;
}

json run_rows(std::int64_t t, const Settings& settings, const Shared& sh,
              const std::vector<std::uint8_t>& q8_host, double read_gbps, cudaStream_t s) {
  const HcPrePlan plan = plan_hc_pre(sh.params, t, Device::cuda);
  const std::int64_t set_bytes = t * kStreams * kEmbd * 4 * 3 + kMix * kStreams * kEmbd * 2 +
                                 static_cast<std::int64_t>(q8_host.size());
  const int sets = static_cast<int>(
      std::clamp<std::int64_t>((kRotationBytes + set_bytes - 1) / set_bytes, 1, kMaxRotation));
  std::vector<CallSet> calls;
  calls.reserve(static_cast<std::size_t>(sets));
  for (int i = 0; i < sets; ++i) calls.emplace_back(t, plan, q8_host, 1000ull * (i + 1), s);
  // The sets were filled on `s` and by copies and memsets on the legacy stream, which the
  // non-blocking `s` does not wait for.
  TD_CUDA_CHECK(cudaDeviceSynchronize());
  // Every op reads a split written by an earlier HC-pre: produce them once.
  for (const CallSet& c : calls) {
    make_ops(sh, plan, t).back().launch(c, Stream{s});
  }
  TD_CUDA_CHECK(cudaStreamSynchronize(s));
  json rows = json::array();
  for (const Op& op : make_ops(sh, plan, t)) {
    if (op.name.find(settings.only_op) == std::string::npos) continue;
    const auto launch = [&](int i) {
      op.launch(calls[static_cast<std::size_t>(i % sets)], Stream{s});
    };
    const double eager = median_event_us(s, settings.warmup, settings.reps, launch);
    const double graph = median_graph_us(s, settings.graph_calls, settings.reps, launch);
    const double gbps = static_cast<double>(op.bytes) / (graph * 1e3);
    std::printf("T %4lld  %-46s eager %9.2f us  graph %9.2f us  %8.1f GB/s (%5.1f%% of read)\n",
                static_cast<long long>(t), op.name.c_str(), eager, graph, gbps,
                100.0 * gbps / read_gbps);
    rows.push_back({{"op", op.name},
                    {"T", t},
                    {"eager_us", eager},
                    {"graph_us", graph},
                    {"bytes", op.bytes},
                    {"graph_gbps", gbps},
                    {"fraction_of_read_stream", gbps / read_gbps},
                    {"rotation_sets", sets}});
  }
  return rows;
}

int run(const Settings& settings, const std::string& json_path) {
  cudaStream_t s;
  TD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const Bandwidth bw =
      measure_bandwidth(settings.bandwidth_bytes, settings.quick ? 5 : 10, cuda_sm_count(), s);
  std::printf("read-stream %.1f GB/s, copy %.1f GB/s\n", bw.read_stream_gbps, bw.copy_gbps);
  const Shared sh(s);
  const auto q8_host = random_q8(42);
  json results = json::array();
  const std::vector<std::int64_t> batches = settings.only_rows > 0
                                                ? std::vector<std::int64_t>{settings.only_rows}
                                                : std::vector<std::int64_t>{1, 32, 512};
  for (std::int64_t t : batches) {
    for (auto& row : run_rows(t, settings, sh, q8_host, bw.read_stream_gbps, s)) {
      results.push_back(row);
    }
  }
  TD_CUDA_CHECK(cudaStreamDestroy(s));
  if (!json_path.empty()) {
    json out = {{"bench", "hc_bench"},
                {"embd", kEmbd},
                {"n_hc", kStreams},
                {"mix_width", kMix},
                {"shared_width", kSharedWidth},
                {"read_stream_gbps", bw.read_stream_gbps},
                {"copy_gbps", bw.copy_gbps},
                {"results", results}};
    std::ofstream(json_path) << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace turbodecode::bench

int main(int argc, char** argv) {
  turbodecode::bench::Settings settings;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      settings.quick = true;
      settings.reps = 10;
      settings.graph_calls = 8;
      settings.bandwidth_bytes = std::int64_t{1} << 30;
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--rows" && i + 1 < argc) {
      settings.only_rows = std::stoll(argv[++i]);
    } else if (arg == "--op" && i + 1 < argc) {
      settings.only_op = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--rows T] [--op NAME_PART] [--json PATH]\n",
                   argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  try {
    if (!turbodecode::cuda_available()) {
      std::fprintf(stderr, "hc_bench: no CUDA device\n");
      return 1;
    }
    return turbodecode::bench::run(settings, json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hc_bench: %s\n", e.what());
    return 1;
  }
}
