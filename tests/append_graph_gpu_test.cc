// append_kv captured once into a CUDA graph (SPEC §1.7, §2.6 graph mode): while capturing, the
// index arrays and the block table are not read on the host, so replays take new k, v, slot
// ids, positions and block table entries, read on the device. Every replay writes what the CPU
// backend writes for its valid tokens; a token naming an unknown slot, a negative position, one
// past a linear cache's capacity, or a table entry outside [0, pages) writes nothing, and no
// other row changes.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "append_gpu_support.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

#ifdef TURBODECODE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace turbodecode {
namespace {

using testing::BlockTable;
using testing::CacheCase;
using testing::DeviceCache;
using testing::kKvHeads;
using testing::kSlots;
using testing::TokenBatch;

#ifdef TURBODECODE_WITH_CUDA
// The tokens and the block table (paged caches) of one replay.
struct Replay {
  std::vector<std::int32_t> slots, positions;
  BlockTable table;
};

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

// Whether a token names a row the cache holds under `table`.
bool names_a_row(const KvCacheConfig& c, const BlockTable& table, std::int32_t slot,
                 std::int32_t position) {
  if (slot < 0 || slot >= c.slots || position < 0) return false;
  if (c.kind == LayerKind::linear && position >= c.capacity) return false;
  if (c.page_size == 0) return true;
  const std::int64_t logical = c.kind == LayerKind::ring ? position % c.capacity : position;
  const std::int32_t page = table.entries[slot * table.per_slot + logical / c.page_size];
  return page >= 0 && page < c.pages;
}

void run_replays(const CacheCase& c, const std::vector<Replay>& replays, std::uint64_t seed) {
  const KvCacheConfig config = testing::config_of(c, Device::cpu);
  DeviceCache cpu(config, replays[0].table);
  DeviceCache gpu(testing::config_of(c, Device::cuda), replays[0].table);
  const auto background = testing::background_of(gpu.view, false, seed);
  testing::fill(cpu.view, background);
  testing::fill(gpu.view, background);
  const auto n = static_cast<std::int64_t>(replays[0].slots.size());
  const std::size_t token_bytes_each = kKvHeads * c.head_dim * dtype_bytes(c.input);

  cudaStream_t raw = nullptr;
  // A blocking stream: it orders after the legacy-stream copies into the batch buffers.
  ASSERT_EQ(cudaStreamCreate(&raw), cudaSuccess);
  TokenBatch device =
      testing::make_batch(Device::cuda, c, replays[0].slots, replays[0].positions, false, seed);
  // First use outside capture, as a server warms up (module loading, launch set-up); the CPU
  // cache gets the same append. The first replay's tokens are all valid.
  TokenBatch warm_up =
      testing::make_batch(Device::cpu, c, replays[0].slots, replays[0].positions, false, seed);
  append_kv(gpu.view, device.k_view, device.v_view, device.slots_view, device.positions_view,
            Stream{raw});
  append_kv(cpu.view, warm_up.k_view, warm_up.v_view, warm_up.slots_view, warm_up.positions_view);
  std::set<std::int64_t> targets;
  for (std::size_t t = 0; t < replays[0].slots.size(); ++t) {
    targets.insert(testing::storage_row(config, replays[0].table, replays[0].slots[t],
                                        replays[0].positions[t]));
  }
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(raw, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  append_kv(gpu.view, device.k_view, device.v_view, device.slots_view, device.positions_view,
            Stream{raw});
  ASSERT_EQ(cudaStreamEndCapture(raw, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  for (std::size_t r = 0; r < replays.size(); ++r) {
    SCOPED_TRACE("replay " + std::to_string(r));
    const Replay& replay = replays[r];
    const std::uint64_t batch_seed = seed + 10 * (r + 1);
    const auto k_bytes = testing::token_bytes(n, c.head_dim, c.input, c.head_dim, batch_seed);
    const auto v_bytes = testing::token_bytes(n, c.head_dim, c.input, c.head_dim, batch_seed + 1);
    device.k.copy_from_host(k_bytes.data(), static_cast<std::int64_t>(k_bytes.size()));
    device.v.copy_from_host(v_bytes.data(), static_cast<std::int64_t>(v_bytes.size()));
    device.slots.copy_from_host(replay.slots.data(), 4 * n);
    device.positions.copy_from_host(replay.positions.data(), 4 * n);
    if (c.page_size > 0) {
      gpu.set_table(replay.table);
      cpu.set_table(replay.table);
    }
    ASSERT_EQ(cudaGraphLaunch(exec, raw), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(raw), cudaSuccess);

    std::vector<std::int32_t> slots, positions;
    std::vector<std::size_t> keep;
    for (std::size_t t = 0; t < replay.slots.size(); ++t) {
      const std::int32_t slot = replay.slots[t], position = replay.positions[t];
      if (!names_a_row(config, replay.table, slot, position)) continue;
      keep.push_back(t);
      slots.push_back(slot);
      positions.push_back(position);
      targets.insert(testing::storage_row(config, replay.table, slot, position));
    }
    TokenBatch host =
        testing::batch_of(Device::cpu, c, tokens_of(k_bytes, keep, token_bytes_each),
                          tokens_of(v_bytes, keep, token_bytes_each), slots, positions, c.head_dim);
    append_kv(cpu.view, host.k_view, host.v_view, host.slots_view, host.positions_view);
  }
  testing::expect_cache_matches(cpu.view, gpu.view, background, targets);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(raw);
}

TEST(AppendGraphGpu, ReplaysWithNewIndices) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const CacheCase c{256, RowFormat::f16, RowFormat::tq8, LayerKind::linear, DType::bf16};
  const auto cap = static_cast<std::int32_t>(testing::kCapacity);
  run_replays(c,
              {{{0, 1, 2, 0}, {0, 0, 0, 1}, {}},
               {{2, 0, 1, 1}, {1, 2, 1, 2}, {}},
               {{1, kSlots + 4, 0, 2}, {3, 2, cap, -1}, {}}},
              seed);
}

// A paged ring cache (3 slots of 40 rows in pages of 16, 11 pages) whose block table changes
// between replays; the last replay's table names no page for two of the rows its tokens use.
TEST(AppendGraphGpu, PagedReplaysFollowChangingBlockTables) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const CacheCase c{256, RowFormat::fp8, RowFormat::tq6, LayerKind::ring, DType::f32, 16};
  const KvCacheConfig config = testing::config_of(c, Device::cpu);
  ASSERT_EQ(config.capacity, 40);
  ASSERT_EQ(config.pages, 11);
  std::mt19937_64 rng(seed);
  const BlockTable first = testing::shuffled_table(config, rng, false);
  const BlockTable second = testing::shuffled_table(config, rng, true);
  BlockTable broken = second;
  broken.entries[1 * 3 + 0] = -1;  // slot 1, logical rows 0 … 15
  broken.entries[0 * 3 + 2] = 11;  // slot 0, logical rows 32 … 39
  run_replays(c,
              {{{0, 1, 2, 0}, {0, 17, 39, 41}, first},
               {{2, 0, 1, 1}, {21, 82, 33, 16}, second},
               {{1, 0, 2, kSlots + 1}, {3, 38, 50, 7}, broken}},
              seed);
}
#endif

}  // namespace
}  // namespace turbodecode
