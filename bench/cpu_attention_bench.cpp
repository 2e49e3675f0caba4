// CPU decode attention against this machine's own memory read bandwidth, measured in the same
// run (SPEC §6 applied to the CPU backend). Shape: B = 1, L = 32,768, D = 256, 16 query / 8 KV
// heads, every K format × V format pair, one query row or a run of four (SPEC §2.8). Each
// timed call reads a different slot of a cache several times larger than the last-level
// cache, so the bytes come from DRAM. Beside each case: its FMA floor, the f32 multiply-adds it
// cannot skip at the rate this machine's cores do them.
//   cpu_attention_bench [--json] [--k-formats f16,tq8] [--v-formats ...] [--query-tokens 1,4]
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu_attention_bench.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "common/f16.h"
#include "common/thread_pool.h"
#include "hwy/highway.h"
#include "turbodecode/attention.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The sum of count floats from p (a multiple of four vectors), in four independent chains so
// that the loads, not the additions, set the pace.
float sum_floats(const float* p, std::int64_t count) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t j = 0; j < count; j += 4 * lanes) {
    a0 = hn::Add(a0, hn::LoadU(d, p + j));
    a1 = hn::Add(a1, hn::LoadU(d, p + j + lanes));
    a2 = hn::Add(a2, hn::LoadU(d, p + j + 2 * lanes));
    a3 = hn::Add(a3, hn::LoadU(d, p + j + 3 * lanes));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

// Runs `rounds` rounds of eight independent chains of f32 fused multiply-adds on the vectors
// the decode kernel uses (at most 16 lanes) and returns the FMAs done; eight chains hide the
// FMA latency of current x86 and Arm cores. The chains' sum goes to `sink`.
std::int64_t fma_chains(std::int64_t rounds, float* sink) {
  const hn::CappedTag<float, 16> d;
  const auto x = hn::Set(d, 0.999999f), y = hn::Set(d, 1e-7f);
  // Distinct starting values, so that no two chains are the same computation.
  auto a0 = hn::Set(d, 1.0f), a1 = hn::Set(d, 1.01f), a2 = hn::Set(d, 1.02f),
       a3 = hn::Set(d, 1.03f), a4 = hn::Set(d, 1.04f), a5 = hn::Set(d, 1.05f),
       a6 = hn::Set(d, 1.06f), a7 = hn::Set(d, 1.07f);
  for (std::int64_t i = 0; i < rounds; ++i) {
    a0 = hn::MulAdd(a0, x, y);
    a1 = hn::MulAdd(a1, x, y);
    a2 = hn::MulAdd(a2, x, y);
    a3 = hn::MulAdd(a3, x, y);
    a4 = hn::MulAdd(a4, x, y);
    a5 = hn::MulAdd(a5, x, y);
    a6 = hn::MulAdd(a6, x, y);
    a7 = hn::MulAdd(a7, x, y);
  }
  const auto sum =
      hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
  *sink = hn::GetLane(sum);
  return rounds * 8 * static_cast<std::int64_t>(hn::Lanes(d));
}

}  // namespace turbodecode::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace turbodecode {
namespace {

HWY_EXPORT(sum_floats);
HWY_EXPORT(fma_chains);

constexpr std::int64_t kBandwidthBufferBytes = std::int64_t{2} << 30;  // ≫ a 480 MiB LLC
constexpr int kBandwidthPasses = 7;
constexpr std::int64_t kLength = 32768;
constexpr int kHeadDim = 256, kHeads = 16, kKvHeads = 8;
// Slots rotated through: at least 6, and a cache of at least 2 GB (≫ a 480 MiB LLC).
constexpr std::int64_t kMinSlots = 6;
constexpr std::int64_t kMinCacheBytes = std::int64_t{2} << 30;
constexpr int kWarmupRuns = 3, kTimedRuns = 15;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

struct Bandwidth {
  double best_gbs, median_gbs;
};

constexpr std::int64_t kFmaRounds = std::int64_t{1} << 24;
constexpr int kFmaPasses = 5;

// f32 fused multiply-adds per second of all threads together on the decode kernel's vectors
// (fma_chains), best of kFmaPasses.
double measure_fma_rate() {
  const int threads = cpu_threads();
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int pass = 0; pass < kFmaPasses; ++pass) {
    std::vector<std::int64_t> fmas(static_cast<std::size_t>(threads));
    std::vector<float> sums(static_cast<std::size_t>(threads));
    const auto start = std::chrono::steady_clock::now();
    parallel_for(threads, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t) {
        fmas[static_cast<std::size_t>(t)] =
            HWY_DYNAMIC_DISPATCH(fma_chains)(kFmaRounds, &sums[static_cast<std::size_t>(t)]);
      }
    });
    const double seconds = seconds_since(start);
    std::int64_t total = 0;
    for (std::int64_t f : fmas) total += f;
    for (float x : sums) sink = sink + x;
    best = std::max(best, static_cast<double>(total) / seconds);
  }
  return best;
}

// The f32 multiply-adds no decode can skip: for every query head and position its row sees,
// D for q·k and D for the weighted V row.
std::int64_t decode_fmas(int query_tokens) {
  std::int64_t seen = 0;
  for (int t = 0; t < query_tokens; ++t) seen += kLength - query_tokens + t + 1;
  return seen * kHeads * 2 * kHeadDim;
}

// Multithreaded streaming read: every thread sums its contiguous share with the widest vector
// loads the CPU has.
Bandwidth measure_read_bandwidth() {
  Buffer buffer(Device::cpu, kBandwidthBufferBytes);
  buffer.fill_bytes(1);
  const auto* data = static_cast<const float*>(buffer.data());
  constexpr std::int64_t kBlockFloats = 1 << 18;  // 1 MiB per work unit
  const std::int64_t blocks = kBandwidthBufferBytes / 4 / kBlockFloats;
  std::vector<double> rates;
  volatile float sink = 0.0f;
  for (int pass = 0; pass < kBandwidthPasses; ++pass) {
    std::vector<float> partial(static_cast<std::size_t>(blocks));
    const auto start = std::chrono::steady_clock::now();
    parallel_for(blocks, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        partial[static_cast<std::size_t>(b)] =
            HWY_DYNAMIC_DISPATCH(sum_floats)(data + b * kBlockFloats, kBlockFloats);
      }
    });
    rates.push_back(static_cast<double>(kBandwidthBufferBytes) / seconds_since(start) / 1e9);
    for (float x : partial) sink = sink + x;
  }
  return {*std::max_element(rates.begin(), rates.end()), median(rates)};
}

// Random cache contents: F16 ~ N(0, 1) from a table, codes uniform, norms near 16.
void fill_cache(const KvCacheView& cache) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> table(4096);
  for (auto& t : table) t = f32_to_f16(normal(rng));
  const auto fill = [&](const TensorView& t) {
    if (!t.present()) return;
    if (t.dtype == DType::f16) {
      auto* p = t.as<std::uint16_t>();
      for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = table[rng() & 4095];
    } else if (t.dtype == DType::u8) {
      auto* p = t.as<std::uint64_t>();  // storage parts are 256-byte aligned and sized
      for (std::int64_t i = 0; i < t.numel() / 8; ++i) p[i] = rng();
    } else {
      auto* p = t.as<float>();
      for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = 12.0f + static_cast<float>(rng() % 8);
    }
  };
  fill(cache.k);
  fill(cache.k_norms);
  fill(cache.v);
  fill(cache.v_norms);
}

struct AttentionResult {
  RowFormat k_format, v_format;
  int query_tokens;
  std::int64_t bytes;
  double median_us, best_us, gbs, fma_floor_us;
};

AttentionResult measure_attention(RowFormat k_format, RowFormat v_format, int query_tokens,
                                  double fma_rate) {
  KvCacheConfig config{1,        kKvHeads, kLength, kHeadDim,   LayerKind::linear,
                       k_format, v_format, 1.0f,    Device::cpu};
  const std::int64_t slot_bytes = kLength * kKvHeads * bytes_per_position(config);
  config.slots = std::max(kMinSlots, (kMinCacheBytes + slot_bytes - 1) / slot_bytes);
  KvCache cache(config);
  fill_cache(cache.view());
  DecodeOptions options;
  options.n_heads = kHeads;
  options.query_tokens = query_tokens;
  const DecodePlan plan = plan_decode(config, options, query_tokens);
  const std::int64_t floats = query_tokens * kHeads * kHeadDim;
  Buffer q(Device::cpu, floats * 4), out(Device::cpu, floats * 4);
  q.fill_bytes(0);
  Buffer workspace(Device::cpu, plan.workspace_bytes);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(query_tokens));
  for (int t = 0; t < query_tokens; ++t) {
    positions[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(kLength - query_tokens + t);
  }
  Buffer pos_buffer(Device::cpu, query_tokens * 4);
  pos_buffer.copy_from_host(positions.data(), query_tokens * 4);
  std::vector<Buffer> slot_buffers;
  for (std::int32_t s = 0; s < config.slots; ++s) {
    const std::vector<std::int32_t> slots(static_cast<std::size_t>(query_tokens), s);
    slot_buffers.emplace_back(Device::cpu, query_tokens * 4);
    slot_buffers.back().copy_from_host(slots.data(), query_tokens * 4);
  }
  std::vector<double> times;
  for (int run = 0; run < kWarmupRuns + kTimedRuns; ++run) {
    const Buffer& slot = slot_buffers[static_cast<std::size_t>(run % config.slots)];
    const auto start = std::chrono::steady_clock::now();
    run_decode(plan, cache.view(), q.view(DType::f32, {query_tokens, kHeads, kHeadDim}),
               slot.view(DType::i32, {query_tokens}), pos_buffer.view(DType::i32, {query_tokens}),
               out.view(DType::f32, {query_tokens, kHeads, kHeadDim}),
               workspace.view(DType::u8, {plan.workspace_bytes}));
    if (run >= kWarmupRuns) times.push_back(seconds_since(start));
  }
  // K + V codes + norms of every visible position and KV head (read once for the whole run),
  // plus q in and out back.
  const std::int64_t bytes = slot_bytes + 2 * floats * 4;
  const double t = median(times);
  const double best = *std::min_element(times.begin(), times.end());
  return {k_format,
          v_format,
          query_tokens,
          bytes,
          t * 1e6,
          best * 1e6,
          static_cast<double>(bytes) / t / 1e9,
          static_cast<double>(decode_fmas(query_tokens)) / fma_rate * 1e6};
}

// A comma-separated list after `flag` in argv, or `fallback`.
std::vector<std::string> list_argument(int argc, char** argv, const std::string& flag,
                                       const std::string& fallback) {
  std::string text = fallback;
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == flag) text = argv[i + 1];
  }
  std::vector<std::string> items;
  for (std::size_t begin = 0; begin <= text.size();) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

}  // namespace
}  // namespace turbodecode

int main(int argc, char** argv) {
  using namespace turbodecode;
  bool json = false;
  for (int i = 1; i < argc; ++i) json = json || std::string(argv[i]) == "--json";
  const auto k_names = list_argument(argc, argv, "--k-formats", "f16,fp8,tq4,tq8");
  const auto v_names = list_argument(argc, argv, "--v-formats", "f16,fp8,tq3,tq4,tq5,tq6,tq8");
  const auto token_counts = list_argument(argc, argv, "--query-tokens", "1,4");
  const Bandwidth bandwidth = measure_read_bandwidth();
  const double fma_rate = measure_fma_rate();
  std::vector<AttentionResult> results;
  for (const std::string& tokens : token_counts) {
    for (const std::string& k : k_names) {
      for (const std::string& v : v_names) {
        results.push_back(
            measure_attention(parse_format(k), parse_format(v), std::stoi(tokens), fma_rate));
      }
    }
  }

  if (json) {
    nlohmann::json report = {
        {"threads", cpu_threads()},
        {"read_bandwidth_gbs", {{"best", bandwidth.best_gbs}, {"median", bandwidth.median_gbs}}},
        {"f32_fmas_per_second", fma_rate},
        {"shape",
         {{"batch", 1},
          {"length", kLength},
          {"head_dim", kHeadDim},
          {"heads", kHeads},
          {"kv_heads", kKvHeads}}}};
    for (const auto& r : results) {
      report["attention"].push_back({{"k_format", format_name(r.k_format)},
                                     {"v_format", format_name(r.v_format)},
                                     {"query_tokens", r.query_tokens},
                                     {"bytes", r.bytes},
                                     {"median_us", r.median_us},
                                     {"best_us", r.best_us},
                                     {"gbs", r.gbs},
                                     {"fma_floor_us", r.fma_floor_us},
                                     {"fraction_of_read_bw", r.gbs / bandwidth.best_gbs}});
    }
    fmt::print("{}\n", report.dump(2));
    return 0;
  }
  fmt::print(
      "threads {}: read bandwidth best {:.1f} GB/s, median {:.1f} GB/s; {:.1f} G f32 FMA/s\n",
      cpu_threads(), bandwidth.best_gbs, bandwidth.median_gbs, fma_rate / 1e9);
  fmt::print("decode B=1 L={} D={} heads {}/{}\n", kLength, kHeadDim, kHeads, kKvHeads);
  fmt::print("{:>4} {:>4} {:>6} {:>12} {:>10} {:>10} {:>8} {:>11} {:>10}\n", "K", "V", "q_len",
             "bytes", "median us", "best us", "GB/s", "of read BW", "FMA floor");
  for (const auto& r : results) {
    fmt::print("{:>4} {:>4} {:>6} {:>12} {:>10.0f} {:>10.0f} {:>8.1f} {:>10.0f}% {:>10.0f}\n",
               format_name(r.k_format), format_name(r.v_format), r.query_tokens, r.bytes,
               r.median_us, r.best_us, r.gbs, 100.0 * r.gbs / bandwidth.best_gbs, r.fma_floor_us);
  }
  return 0;
}
#endif  // HWY_ONCE
