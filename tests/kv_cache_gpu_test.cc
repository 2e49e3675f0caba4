// append_kv on the CUDA backend against the CPU backend (SPEC §1.3, §5): the rows it writes
// match the CPU's (F16 rows bitwise, codes and norms within the codec allowance), ring layers
// wrap, and no byte outside the named rows ever changes (the cache starts filled with random
// bytes or NaN poison, and every other row must keep it).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codec_agreement.h"
#include "common/cuda_runtime.h"
#include "common/f16.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

#ifdef TURBODECODE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace turbodecode {
namespace {

constexpr int kSlots = 3;
constexpr int kKvHeads = 2;
constexpr std::int64_t kCapacity = 12;

struct CacheCase {
  int head_dim;
  RowFormat k_format, v_format;
  LayerKind kind;
  DType input;
};

std::string case_label(const CacheCase& c) {
  std::string label = "D";
  label += std::to_string(c.head_dim);
  for (const char* part :
       {" K ", format_name(c.k_format), " V ", format_name(c.v_format),
        c.kind == LayerKind::ring ? " ring " : " linear ", dtype_name(c.input)}) {
    label += part;
  }
  return label;
}

KvCacheConfig config_of(const CacheCase& c, Device device, std::int64_t capacity = kCapacity) {
  KvCacheConfig config;
  config.slots = kSlots;
  config.n_kv_heads = kKvHeads;
  config.capacity = capacity;
  config.head_dim = c.head_dim;
  config.kind = c.kind;
  config.k_format = c.k_format;
  config.v_format = c.v_format;
  config.device = device;
  return config;
}

// One array of a cache (K rows, K norms, V rows, V norms) and how its rows compare.
enum class PartKind { f16_rows, codes, norms };
struct CachePart {
  TensorView view;
  PartKind kind;
  RowFormat format;
};

std::vector<CachePart> parts_of(const KvCacheView& cache) {
  std::vector<CachePart> parts;
  const auto add = [&](const TensorView& rows, const TensorView& norms, RowFormat format) {
    if (!is_quantized(format)) {
      parts.push_back({rows, PartKind::f16_rows, format});
      return;
    }
    parts.push_back({rows, PartKind::codes, format});
    parts.push_back({norms, PartKind::norms, format});
  };
  add(cache.k, cache.k_norms, cache.config.k_format);
  add(cache.v, cache.v_norms, cache.config.v_format);
  return parts;
}

std::int64_t row_bytes_of(const CachePart& part) {
  return part.view.shape[3] * static_cast<std::int64_t>(dtype_bytes(part.view.dtype));
}

std::vector<std::uint8_t> download(const TensorView& t) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(t.span_bytes()));
  if (t.device == Device::cuda) {
    cuda::copy_to_host(bytes.data(), t.data, t.span_bytes());
  } else {
    std::memcpy(bytes.data(), t.data, bytes.size());
  }
  return bytes;
}

void upload(const TensorView& t, const std::vector<std::uint8_t>& bytes) {
  if (t.device == Device::cuda) {
    cuda::copy_to_device(t.data, bytes.data(), static_cast<std::int64_t>(bytes.size()));
  } else {
    std::memcpy(t.data, bytes.data(), bytes.size());
  }
}

// A background for every part: random bytes, or all 0xFF (NaN as f32/f16).
std::vector<std::vector<std::uint8_t>> background_of(const KvCacheView& cache, bool poison,
                                                     std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::uint8_t>> background;
  for (const CachePart& part : parts_of(cache)) {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(part.view.span_bytes()), 0xFF);
    if (!poison) {
      for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    }
    background.push_back(std::move(bytes));
  }
  return background;
}

void fill(const KvCacheView& cache, const std::vector<std::vector<std::uint8_t>>& background) {
  const auto parts = parts_of(cache);
  for (std::size_t p = 0; p < parts.size(); ++p) upload(parts[p].view, background[p]);
}

// A batch of tokens for append_kv on one device: k, v [n, heads, D] (head stride D, or D + 1
// to take the kernels' unaligned path), slot ids and positions.
struct TokenBatch {
  Buffer k, v, slots, positions;
  TensorView k_view, v_view, slots_view, positions_view;
};

std::vector<std::uint8_t> token_bytes(std::int64_t tokens, int head_dim, DType dtype,
                                      std::int64_t head_stride, std::uint64_t seed) {
  const auto values =
      testing::gaussian(static_cast<std::size_t>(tokens * kKvHeads * head_stride), seed, 2.0f);
  const auto element = static_cast<std::int64_t>(dtype_bytes(dtype));
  std::vector<std::uint8_t> bytes(values.size() * static_cast<std::size_t>(element));
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint8_t* at = bytes.data() + i * static_cast<std::size_t>(element);
    if (dtype == DType::f32) {
      std::memcpy(at, &values[i], 4);
    } else {
      const std::uint16_t half =
          dtype == DType::f16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
      std::memcpy(at, &half, 2);
    }
  }
  return bytes;
}

// A batch holding given k and v bytes ([n, heads, head_stride] of c.input).
TokenBatch batch_of(Device device, const CacheCase& c, const std::vector<std::uint8_t>& k_bytes,
                    const std::vector<std::uint8_t>& v_bytes,
                    const std::vector<std::int32_t>& slots,
                    const std::vector<std::int32_t>& positions, std::int64_t head_stride) {
  const auto n = static_cast<std::int64_t>(slots.size());
  TokenBatch b;
  const auto make_rows = [&](Buffer& buffer, TensorView& view,
                             const std::vector<std::uint8_t>& bytes) {
    buffer = testing::to_device(device, bytes);
    view = TensorView::contiguous(buffer.data(), c.input, {n, kKvHeads, c.head_dim}, device);
    view.strides = {kKvHeads * head_stride, head_stride, 1, 0};
  };
  make_rows(b.k, b.k_view, k_bytes);
  make_rows(b.v, b.v_view, v_bytes);
  b.slots = testing::to_device(device, slots);
  b.positions = testing::to_device(device, positions);
  b.slots_view = TensorView::contiguous(b.slots.data(), DType::i32, {n}, device);
  b.positions_view = TensorView::contiguous(b.positions.data(), DType::i32, {n}, device);
  return b;
}

TokenBatch make_batch(Device device, const CacheCase& c, const std::vector<std::int32_t>& slots,
                      const std::vector<std::int32_t>& positions, bool padded, std::uint64_t seed) {
  const auto n = static_cast<std::int64_t>(slots.size());
  const std::int64_t head_stride = c.head_dim + (padded ? 1 : 0);
  return batch_of(device, c, token_bytes(n, c.head_dim, c.input, head_stride, seed),
                  token_bytes(n, c.head_dim, c.input, head_stride, seed + 1), slots, positions,
                  head_stride);
}

// Compares every row of every part: rows named in `targets` (slot · capacity + row) against
// the CPU backend's, all others against the background.
void expect_cache_matches(const KvCacheView& cpu, const KvCacheView& gpu,
                          const std::vector<std::vector<std::uint8_t>>& background,
                          const std::set<std::int64_t>& targets) {
  const auto cpu_parts = parts_of(cpu);
  const auto gpu_parts = parts_of(gpu);
  const std::int64_t capacity = gpu.config.capacity;
  for (std::size_t p = 0; p < gpu_parts.size(); ++p) {
    SCOPED_TRACE("cache part " + std::to_string(p));
    const CachePart& part = gpu_parts[p];
    const auto want = download(cpu_parts[p].view);
    const auto got = download(part.view);
    const std::int64_t row_bytes = row_bytes_of(part);
    const std::int64_t rows = static_cast<std::int64_t>(got.size()) / row_bytes;
    testing::CodeAgreement codes;
    std::int64_t other_rows_changed = 0, rows_differing = 0;
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t slot = i / (kKvHeads * capacity);
      const std::int64_t target = slot * capacity + i % capacity;
      const std::uint8_t* g = got.data() + i * row_bytes;
      const std::uint8_t* w = want.data() + i * row_bytes;
      if (!targets.count(target)) {
        other_rows_changed += std::memcmp(g, background[p].data() + i * row_bytes,
                                          static_cast<std::size_t>(row_bytes)) != 0;
      } else if (part.kind == PartKind::codes) {
        testing::compare_code_row(w, g, row_bytes, part.format, codes);
      } else if (part.kind == PartKind::norms) {
        for (std::int64_t k = 0; k < row_bytes / 4; ++k) {
          float a, b;
          std::memcpy(&a, w + 4 * k, 4);
          std::memcpy(&b, g + 4 * k, 4);
          rows_differing += !testing::norms_agree(a, b);
        }
      } else {
        rows_differing += std::memcmp(g, w, static_cast<std::size_t>(row_bytes)) != 0;
      }
    }
    EXPECT_EQ(other_rows_changed, 0) << "rows outside the appended ones changed";
    EXPECT_EQ(rows_differing, 0) << "appended rows differ from the CPU backend";
    EXPECT_TRUE(codes.within_spec()) << codes.describe();
  }
}

// Rounds of appends, as a server would issue them: a prefill of two slots, a decode step of
// every slot, then a step that wraps ring layers (or fills a linear layer to its capacity).
struct Round {
  std::vector<std::int32_t> slots, positions;
};

std::vector<Round> rounds_for(LayerKind kind) {
  Round prefill;
  for (int p = 0; p < 10; ++p) {
    prefill.slots.push_back(0);
    prefill.positions.push_back(p);
  }
  for (int p = 0; p < 5; ++p) {
    prefill.slots.push_back(2);
    prefill.positions.push_back(p);
  }
  Round step{{0, 1, 2}, {10, 0, 5}};
  Round last =
      kind == LayerKind::ring ? Round{{0, 2, 1}, {13, 30, 12 + 11}} : Round{{0, 2, 1}, {11, 6, 11}};
  return {prefill, step, last};
}

void run_case(const CacheCase& c, bool poison) {
  const std::uint64_t seed = testing::fresh_seed();
  std::string label = case_label(c);
  label += poison ? ", NaN background, seed " : ", random background, seed ";
  label += std::to_string(seed);
  SCOPED_TRACE(label);
  KvCache cpu(config_of(c, Device::cpu));
  KvCache gpu(config_of(c, Device::cuda));
  const auto background = background_of(gpu.view(), poison, seed);
  fill(cpu.view(), background);
  fill(gpu.view(), background);
  std::set<std::int64_t> targets;
  const auto rounds = rounds_for(c.kind);
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    const Round& round = rounds[r];
    const bool padded = r == 1;
    const std::uint64_t batch_seed = seed + 10 * (r + 1);
    TokenBatch on_cpu =
        make_batch(Device::cpu, c, round.slots, round.positions, padded, batch_seed);
    TokenBatch on_gpu =
        make_batch(Device::cuda, c, round.slots, round.positions, padded, batch_seed);
    append_kv(cpu.view(), on_cpu.k_view, on_cpu.v_view, on_cpu.slots_view, on_cpu.positions_view);
    append_kv(gpu.view(), on_gpu.k_view, on_gpu.v_view, on_gpu.slots_view, on_gpu.positions_view);
    for (std::size_t t = 0; t < round.slots.size(); ++t) {
      targets.insert(round.slots[t] * kCapacity + round.positions[t] % kCapacity);
    }
  }
  synchronize();
  expect_cache_matches(cpu.view(), gpu.view(), background, targets);
}

class KvCacheGpuTest : public ::testing::TestWithParam<CacheCase> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(KvCacheGpuTest, AppendMatchesCpuOverRandomBackground) {
  run_case(GetParam(), false);
}

TEST_P(KvCacheGpuTest, AppendMatchesCpuOverNanBackground) {
  run_case(GetParam(), true);
}

const CacheCase kCases[] = {
    {256, RowFormat::f16, RowFormat::tq8, LayerKind::linear, DType::f32},
    {256, RowFormat::f16, RowFormat::tq4, LayerKind::ring, DType::f16},
    {256, RowFormat::f16, RowFormat::tq5, LayerKind::linear, DType::bf16},
    {256, RowFormat::f16, RowFormat::tq6, LayerKind::ring, DType::f32},
    {256, RowFormat::f16, RowFormat::f16, LayerKind::ring, DType::bf16},
    {256, RowFormat::tq8, RowFormat::tq8, LayerKind::ring, DType::f32},
    {512, RowFormat::f16, RowFormat::tq8, LayerKind::ring, DType::f32},
    {512, RowFormat::f16, RowFormat::tq4, LayerKind::linear, DType::bf16},
    {512, RowFormat::f16, RowFormat::tq6, LayerKind::linear, DType::f16},
    {512, RowFormat::f16, RowFormat::f16, LayerKind::linear, DType::f16},
    {512, RowFormat::tq8, RowFormat::tq5, LayerKind::ring, DType::f32},
};

std::string case_name(const ::testing::TestParamInfo<CacheCase>& tested) {
  std::string name = "case";
  name += std::to_string(tested.index);
  return name;
}

INSTANTIATE_TEST_SUITE_P(Formats, KvCacheGpuTest, ::testing::ValuesIn(kCases), case_name);

// Batches with more rows than a wave of the append kernel has warps, so warps write several
// rows each with the next ones' loads in flight: 3 slots × 2048 positions × 2 KV heads.
TEST_P(KvCacheGpuTest, LargeAppendMatchesCpu) {
  const CacheCase& c = GetParam();
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(case_label(c) + ", seed " + std::to_string(seed));
  constexpr std::int64_t capacity = 2048;
  KvCache cpu(config_of(c, Device::cpu, capacity));
  KvCache gpu(config_of(c, Device::cuda, capacity));
  const auto background = background_of(gpu.view(), false, seed);
  fill(cpu.view(), background);
  fill(gpu.view(), background);
  // Ring layers take positions of the cache's second lap, so the rows wrap.
  const std::int32_t lap = c.kind == LayerKind::ring ? capacity : 0;
  std::vector<std::int32_t> slots, positions;
  std::set<std::int64_t> targets;
  for (std::int32_t t = 0; t < kSlots * capacity; ++t) {
    slots.push_back(t % kSlots);
    positions.push_back(lap + t / kSlots);
    targets.insert((t % kSlots) * capacity + t / kSlots);
  }
  TokenBatch on_cpu = make_batch(Device::cpu, c, slots, positions, false, seed);
  TokenBatch on_gpu = make_batch(Device::cuda, c, slots, positions, false, seed);
  append_kv(cpu.view(), on_cpu.k_view, on_cpu.v_view, on_cpu.slots_view, on_cpu.positions_view);
  append_kv(gpu.view(), on_gpu.k_view, on_gpu.v_view, on_gpu.slots_view, on_gpu.positions_view);
  synchronize();
  expect_cache_matches(cpu.view(), gpu.view(), background, targets);
}

#ifdef TURBODECODE_WITH_CUDA
// The bytes of the tokens listed in `keep`, from `bytes` holding bytes_per_token per token.
std::vector<std::uint8_t> tokens_of(const std::vector<std::uint8_t>& bytes,
                                    const std::vector<std::size_t>& keep,
                                    std::size_t bytes_per_token) {
  std::vector<std::uint8_t> kept;
  for (std::size_t t : keep) {
    kept.insert(kept.end(), bytes.begin() + static_cast<std::ptrdiff_t>(t * bytes_per_token),
                bytes.begin() + static_cast<std::ptrdiff_t>((t + 1) * bytes_per_token));
  }
  return kept;
}

// append_kv captured once into a CUDA graph (no host read of the indices while capturing)
// replays with new k, v, slot ids and positions and writes what the CPU backend writes for the
// valid tokens; a token naming an unknown slot, a negative position or one past the linear
// cache's capacity writes nothing, and no other row changes.
TEST(KvCacheGpuGraph, CapturedAppendReplaysWithNewIndices) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const CacheCase c{256, RowFormat::f16, RowFormat::tq8, LayerKind::linear, DType::bf16};
  KvCache cpu(config_of(c, Device::cpu));
  KvCache gpu(config_of(c, Device::cuda));
  const auto background = background_of(gpu.view(), false, seed);
  fill(cpu.view(), background);
  fill(gpu.view(), background);
  const std::vector<Round> replays = {{{0, 1, 2, 0}, {0, 0, 0, 1}},
                                      {{2, 0, 1, 1}, {1, 2, 1, 2}},
                                      {{1, kSlots + 4, 0, 2}, {3, 2, kCapacity, -1}}};
  const auto n = static_cast<std::int64_t>(replays[0].slots.size());
  const std::size_t token_bytes_each = kKvHeads * c.head_dim * dtype_bytes(c.input);

  cudaStream_t raw = nullptr;
  // A blocking stream: it orders after the legacy-stream copies into the batch buffers.
  ASSERT_EQ(cudaStreamCreate(&raw), cudaSuccess);
  TokenBatch device =
      make_batch(Device::cuda, c, replays[0].slots, replays[0].positions, false, seed);
  // First use outside capture, as a server warms up (module loading, launch set-up); the
  // CPU cache gets the same append.
  TokenBatch warm_up =
      make_batch(Device::cpu, c, replays[0].slots, replays[0].positions, false, seed);
  append_kv(gpu.view(), device.k_view, device.v_view, device.slots_view, device.positions_view,
            Stream{raw});
  append_kv(cpu.view(), warm_up.k_view, warm_up.v_view, warm_up.slots_view, warm_up.positions_view);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(raw, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  append_kv(gpu.view(), device.k_view, device.v_view, device.slots_view, device.positions_view,
            Stream{raw});
  ASSERT_EQ(cudaStreamEndCapture(raw, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  std::set<std::int64_t> targets;
  for (std::size_t r = 0; r < replays.size(); ++r) {
    const Round& round = replays[r];
    const std::uint64_t batch_seed = seed + 10 * (r + 1);
    const auto k_bytes = token_bytes(n, c.head_dim, c.input, c.head_dim, batch_seed);
    const auto v_bytes = token_bytes(n, c.head_dim, c.input, c.head_dim, batch_seed + 1);
    device.k.copy_from_host(k_bytes.data(), static_cast<std::int64_t>(k_bytes.size()));
    device.v.copy_from_host(v_bytes.data(), static_cast<std::int64_t>(v_bytes.size()));
    device.slots.copy_from_host(round.slots.data(), 4 * n);
    device.positions.copy_from_host(round.positions.data(), 4 * n);
    ASSERT_EQ(cudaGraphLaunch(exec, raw), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(raw), cudaSuccess);

    Round valid;
    std::vector<std::size_t> keep;
    for (std::size_t t = 0; t < round.slots.size(); ++t) {
      const std::int32_t slot = round.slots[t], position = round.positions[t];
      if (slot >= kSlots || position < 0 || position >= kCapacity) continue;
      keep.push_back(t);
      valid.slots.push_back(slot);
      valid.positions.push_back(position);
      targets.insert(slot * kCapacity + position);
    }
    TokenBatch host = batch_of(Device::cpu, c, tokens_of(k_bytes, keep, token_bytes_each),
                               tokens_of(v_bytes, keep, token_bytes_each), valid.slots,
                               valid.positions, c.head_dim);
    append_kv(cpu.view(), host.k_view, host.v_view, host.slots_view, host.positions_view);
  }
  expect_cache_matches(cpu.view(), gpu.view(), background, targets);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(raw);
}
#endif

// A small append of each kernel variant, for compute-sanitizer's racecheck and synccheck.
TEST(KvCacheGpuSanitizer, SmallAppends) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const CacheCase& c : {kCases[0], kCases[1], kCases[6], kCases[10]}) {
    KvCache gpu(config_of(c, Device::cuda));
    TokenBatch batch = make_batch(Device::cuda, c, {0, 1, 2}, {3, 0, 7}, false, 11);
    append_kv(gpu.view(), batch.k_view, batch.v_view, batch.slots_view, batch.positions_view);
    synchronize();
  }
}

}  // namespace
}  // namespace turbodecode
