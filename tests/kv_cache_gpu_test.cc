// append_kv on the CUDA backend against the CPU backend (SPEC §1.3, §1.7, §5): the rows it
// writes match the CPU's (F16 rows bitwise, TQ codes and norms within the codec allowance, FP8
// codes and scales exactly) for every format, contiguous and paged caches (shuffled and shared
// pages), linear and ring layers (ring wrap across pages), and no byte outside the named rows
// ever changes (the cache starts filled with random bytes or NaN poison, and every other row
// must keep it).
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "append_gpu_support.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode {
namespace {

using testing::BlockTable;
using testing::CacheCase;
using testing::DeviceCache;
using testing::kKvHeads;
using testing::kSlots;
using testing::TokenBatch;

// A shuffled block table for a paged configuration (empty for a contiguous one).
BlockTable table_for(const KvCacheConfig& c, std::uint64_t seed, bool shared_prefix = false) {
  if (c.page_size == 0) return {};
  std::mt19937_64 rng(seed);
  return testing::shuffled_table(c, rng, shared_prefix);
}

// Rounds of appends, as a server would issue them: a prefill of two slots, a decode step of
// every slot, then a step that wraps ring layers (or fills a linear layer to its capacity).
struct Round {
  std::vector<std::int32_t> slots, positions;
};

std::vector<Round> rounds_for(const KvCacheConfig& c) {
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
  const auto cap = static_cast<std::int32_t>(c.capacity);
  Round last = c.kind == LayerKind::ring ? Round{{0, 2, 1}, {cap + 1, 2 * cap + 6, 2 * cap - 1}}
                                         : Round{{0, 2, 1}, {11, 6, cap - 1}};
  return {prefill, step, last};
}

// Appends `rounds` to caches of both devices over one background and compares them.
void run_rounds(const CacheCase& c, std::int64_t capacity, const std::vector<Round>& rounds,
                bool shared_prefix, bool poison, std::uint64_t seed) {
  const KvCacheConfig config = testing::config_of(c, Device::cpu, capacity);
  const BlockTable table = table_for(config, seed, shared_prefix);
  DeviceCache cpu(config, table);
  DeviceCache gpu(testing::config_of(c, Device::cuda, capacity), table);
  const auto background = testing::background_of(gpu.view, poison, seed);
  testing::fill(cpu.view, background);
  testing::fill(gpu.view, background);
  std::set<std::int64_t> targets;
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    const Round& round = rounds[r];
    const bool padded = r == 1;
    const std::uint64_t batch_seed = seed + 10 * (r + 1);
    TokenBatch on_cpu =
        testing::make_batch(Device::cpu, c, round.slots, round.positions, padded, batch_seed);
    TokenBatch on_gpu =
        testing::make_batch(Device::cuda, c, round.slots, round.positions, padded, batch_seed);
    append_kv(cpu.view, on_cpu.k_view, on_cpu.v_view, on_cpu.slots_view, on_cpu.positions_view);
    append_kv(gpu.view, on_gpu.k_view, on_gpu.v_view, on_gpu.slots_view, on_gpu.positions_view);
    for (std::size_t t = 0; t < round.slots.size(); ++t) {
      targets.insert(testing::storage_row(config, table, round.slots[t], round.positions[t]));
    }
  }
  synchronize();
  testing::expect_cache_matches(cpu.view, gpu.view, background, targets);
}

void run_case(const CacheCase& c, bool poison) {
  const std::uint64_t seed = testing::fresh_seed();
  std::string label = testing::case_label(c);
  label += poison ? ", NaN background, seed " : ", random background, seed ";
  label += std::to_string(seed);
  SCOPED_TRACE(label);
  run_rounds(c, testing::kCapacity, rounds_for(testing::config_of(c, Device::cpu)), false, poison,
             seed);
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
    {256, RowFormat::f16, RowFormat::fp8, LayerKind::linear, DType::bf16},
    {256, RowFormat::fp8, RowFormat::tq3, LayerKind::ring, DType::f16},
    {512, RowFormat::fp8, RowFormat::fp8, LayerKind::linear, DType::f32},
    {512, RowFormat::tq3, RowFormat::tq6, LayerKind::ring, DType::bf16},
    {256, RowFormat::fp8, RowFormat::fp8, LayerKind::ring, DType::f32, 16},
    {256, RowFormat::f16, RowFormat::tq3, LayerKind::linear, DType::f16, 32},
    {512, RowFormat::fp8, RowFormat::tq5, LayerKind::ring, DType::bf16, 64},
    {512, RowFormat::tq3, RowFormat::tq6, LayerKind::linear, DType::f32, 128},
    {256, RowFormat::tq5, RowFormat::tq4, LayerKind::ring, DType::bf16, 16},
    {512, RowFormat::f16, RowFormat::tq8, LayerKind::ring, DType::f32, 16},
    {256, RowFormat::f16, RowFormat::f16, LayerKind::linear, DType::bf16, 64},
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
  SCOPED_TRACE(testing::case_label(c) + ", seed " + std::to_string(seed));
  constexpr std::int64_t capacity = 2048;
  // Ring layers take positions of the cache's second lap, so the rows wrap.
  const std::int32_t lap = c.kind == LayerKind::ring ? capacity : 0;
  Round all;
  for (std::int32_t t = 0; t < kSlots * capacity; ++t) {
    all.slots.push_back(t % kSlots);
    all.positions.push_back(lap + t / kSlots);
  }
  run_rounds(c, capacity, {all}, false, false, seed);
}

// Slots sharing their first page (prefix sharing): tokens of different slots write rows of the
// shared page and of their own pages in one batch.
TEST(KvCacheGpuPaged, SharedPagesTakeWritesFromAnySlot) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (LayerKind kind : {LayerKind::linear, LayerKind::ring}) {
    const CacheCase c{256, RowFormat::fp8, RowFormat::tq5, kind, DType::bf16, 16};
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::case_label(c) + ", seed " + std::to_string(seed));
    const std::int32_t lap = kind == LayerKind::ring ? 40 : 0;  // capacity 40: 2.5 pages
    const Round shared{{0, 1, 2, 2, 1, 0}, {3, 9 + lap, 15, 16, 33, 39}};
    run_rounds(c, testing::kCapacity, {shared}, true, false, seed);
  }
}

// A small append of each kernel variant, for compute-sanitizer's racecheck and synccheck.
TEST(KvCacheGpuSanitizer, SmallAppends) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const CacheCase& c : {kCases[0], kCases[1], kCases[6], kCases[10], kCases[12], kCases[17]}) {
    const KvCacheConfig config = testing::config_of(c, Device::cuda);
    DeviceCache gpu(config, table_for(config, 3));
    TokenBatch batch = testing::make_batch(Device::cuda, c, {0, 1, 2}, {3, 0, 7}, false, 11);
    append_kv(gpu.view, batch.k_view, batch.v_view, batch.slots_view, batch.positions_view);
    synchronize();
  }
}

}  // namespace
}  // namespace turbodecode
