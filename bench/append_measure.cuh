// Quantize-on-append benchmark: append_kv of a batch of tokens (one per sequence, as a decode
// step appends them) for every KV head, eager and in CUDA-graph replay, into a contiguous or a
// paged cache (pages in shuffled order). Bytes counted: the k and v inputs, index arrays and
// block table entries read, the K rows, V rows and V side values written. Beside it, in the same
// graph setting: the bandwidth kernel reading as many bytes, and the append's data movement
// alone (the row copy floor, below).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cuda/append_cuda.h"
#include "cache/row_location.h"
#include "common/cuda/dependent_launch.cuh"
#include "common/validate.h"
#include "tq/cuda/row_launch.h"
#include "gpu_timing.cuh"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::bench {

struct AppendCase {
  int n_kv_heads;
  int head_dim;
  RowFormat v_format;
  DType input;
  std::int64_t tokens;
  int page_size = 0;  // 0: contiguous
};

inline std::vector<AppendCase> append_cases(bool quick) {
  std::vector<AppendCase> cases = {
      {8, 256, RowFormat::tq8, DType::bf16, 64}, {8, 256, RowFormat::tq8, DType::f32, 64},
      {8, 256, RowFormat::tq4, DType::bf16, 64}, {8, 256, RowFormat::f16, DType::bf16, 64},
      {2, 512, RowFormat::tq8, DType::bf16, 64}, {2, 512, RowFormat::f16, DType::bf16, 64},
  };
  if (quick) cases.resize(2);
  // The same decode step into pages of 16: paging adds one block table load per row.
  cases.push_back({8, 256, RowFormat::tq8, DType::bf16, 64, 16});
  if (!quick) {
    cases.push_back({8, 256, RowFormat::fp8, DType::bf16, 64});
    cases.push_back({8, 256, RowFormat::tq5, DType::bf16, 64});
    cases.push_back({8, 256, RowFormat::tq3, DType::bf16, 64, 16});
  }
  // Prefill-sized batches show the kernel's throughput once launch latency no longer dominates.
  const std::int64_t prefill = quick ? 1024 : 8192;
  cases.push_back({8, 256, RowFormat::tq8, DType::bf16, prefill});
  cases.push_back({8, 256, RowFormat::tq8, DType::bf16, prefill, 16});
  cases.push_back({2, 512, RowFormat::tq8, DType::bf16, prefill});
  cases.push_back({2, 512, RowFormat::tq8, DType::bf16, prefill, 16});
  return cases;
}

// ---- Row copy floor: the append's bytes, to the append's places, with nothing else. ----

// One storage part of the cache (K or V rows, or V side values): [blocks, heads, block_rows, …]
// with byte strides, and the bytes of one row there.
struct StoragePart {
  unsigned char* data;
  std::int64_t block_bytes, head_bytes, row_bytes;
  int bytes;  // per row; 0: the part is absent

  __device__ unsigned char* at(int head, int2 location) const {
    return data + location.x * block_bytes + head * head_bytes + location.y * row_bytes;
  }
};

inline StoragePart storage_part(const TensorView& part, std::int64_t bytes_per_row) {
  if (!part.present()) return {};
  return {static_cast<unsigned char*>(part.data), cuda::stride_bytes(part, 0),
          cuda::stride_bytes(part, 1), cuda::stride_bytes(part, 2),
          static_cast<int>(bytes_per_row)};
}

inline constexpr int kMaxLaneVectors = 4;

struct RowCopyLaunch {
  const uint4* k_in;  // [tokens, heads, in_vectors] 16-byte words, contiguous
  const uint4* v_in;
  int in_vectors;     // per row, a multiple of 32 at most 32 · kMaxLaneVectors
  StoragePart k_rows, v_rows, v_sides;
  const int2* locations;  // per token: storage block and row (block < 0: not written)
  int rows, n_kv_heads;
};

// Lane l writes 16-byte words l, l + 32, … of the part's row from the input row's first words
// (and the side values from word 0).
__device__ __forceinline__ void write_part(const StoragePart& part, int head, int2 location,
                                           const uint4* words, int lane) {
  if (part.bytes == 0) return;
  unsigned char* row = part.at(head, location);
  if (part.bytes % 16 != 0) {  // side values: 4 bytes each
    if (lane * 4 < part.bytes) reinterpret_cast<float*>(row)[lane] = __uint_as_float(words[0].x);
    return;
  }
#pragma unroll
  for (int i = 0; i < kMaxLaneVectors; ++i) {
    const int word = lane + 32 * i;
    if (word * 16 < part.bytes) reinterpret_cast<uint4*>(row)[word] = words[i];
  }
}

// One warp per (token, head) row, as many warps as rows, so that the card keeps as many rows in
// flight as it holds warps: the warp loads the row's k and v inputs and its token's storage
// location (found beforehand, so that a contiguous and a paged cache take the same loads and
// instructions and differ only in where rows go) and writes the K row, the V row and the V side
// values as many bytes as the append writes there.
__global__ void row_copy_floor_kernel(const RowCopyLaunch p) {
  cuda::allow_dependent_grids();
  cuda::wait_for_prior_grids();
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int row = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / 32);
  if (row >= p.rows) return;
  uint4 k[kMaxLaneVectors], v[kMaxLaneVectors];
#pragma unroll
  for (int i = 0; i < kMaxLaneVectors; ++i) {
    const int word = lane + 32 * i;
    const std::int64_t at = static_cast<std::int64_t>(row) * p.in_vectors + word;
    k[i] = word < p.in_vectors ? __ldcs(p.k_in + at) : uint4{};
    v[i] = word < p.in_vectors ? __ldcs(p.v_in + at) : uint4{};
  }
  const int2 location = p.locations[row / p.n_kv_heads];
  if (location.x < 0) return;
  const int head = row % p.n_kv_heads;
  write_part(p.v_rows, head, location, v, lane);
  write_part(p.v_sides, head, location, v, lane);
  write_part(p.k_rows, head, location, k, lane);
}

// The storage location of each token's row (slot_ids[t], positions[t]) in a cache of this
// configuration, from the addressing of its view with the block table's host copy.
inline std::vector<int2> row_locations(const KvCacheView& cache,
                                       const std::vector<std::int32_t>& host_table,
                                       const std::int32_t* slot_ids, const std::int32_t* positions,
                                       std::int64_t tokens) {
  cache::RowAddressing addressing = cache::row_addressing(cache);
  addressing.block_table = host_table.data();
  std::vector<int2> out(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) {
    const cache::RowLocation r = addressing.locate(slot_ids[t], positions[t]);
    out[static_cast<std::size_t>(t)] = {static_cast<int>(r.block), static_cast<int>(r.row)};
  }
  return out;
}

// The row copy floor of an append of `tokens` rows of k and v ([tokens, heads, D], contiguous)
// to the token locations at `locations` of `cache`, as a dependent launch.
inline void launch_row_copy_floor(const KvCacheView& cache, const TensorView& k,
                                  const TensorView& v, const int2* locations,
                                  cudaStream_t stream) {
  constexpr int kThreads = 256;
  const KvCacheConfig& c = cache.config;
  const int rows = static_cast<int>(k.shape[0] * c.n_kv_heads);
  const int in_vectors = static_cast<int>(c.head_dim * dtype_bytes(k.dtype) / 16);
  check_arg(in_vectors % 32 == 0 && in_vectors <= 32 * kMaxLaneVectors, "k",
            "row copy floor: input rows of 32 to 128 16-byte words");
  const int blocks = (rows + kThreads / 32 - 1) / (kThreads / 32);
  const RowCopyLaunch p{static_cast<const uint4*>(k.data),
                        static_cast<const uint4*>(v.data),
                        in_vectors,
                        storage_part(cache.k, row_bytes(RowFormat::f16, c.head_dim)),
                        storage_part(cache.v, row_bytes(c.v_format, c.head_dim)),
                        storage_part(cache.v_norms, 4 * row_scales(c.v_format, c.head_dim)),
                        locations,
                        rows,
                        c.n_kv_heads};
  cuda::launch_dependent(row_copy_floor_kernel, dim3(blocks), dim3(kThreads), 0, stream, p);
}

inline std::int64_t append_bytes(const AppendCase& c) {
  const std::int64_t rows = c.tokens * c.n_kv_heads;
  const auto in_bytes = static_cast<std::int64_t>(dtype_bytes(c.input));
  const std::int64_t table_entries = c.page_size > 0 ? c.tokens : 0;
  const std::int64_t read = 2 * rows * c.head_dim * in_bytes + (2 * c.tokens + table_entries) * 4;
  const std::int64_t v_norms = 4 * row_scales(c.v_format, c.head_dim);
  const std::int64_t written =
      rows * (row_bytes(RowFormat::f16, c.head_dim) + row_bytes(c.v_format, c.head_dim) + v_norms);
  return read + written;
}

// Times append_kv for one case. Every timed call writes other cache rows (kPositionSets sets of
// positions, cycled) so that calls do not rewrite the same lines. Calls the CUDA backend
// directly: outside graph capture the public append_kv reads the index arrays on the host (a
// stream sync), which would time the host round trip; one public call validates first.
inline nlohmann::json measure_append(const AppendCase& c, int warmup, int reps, int graph_calls,
                                     cudaStream_t stream) {
  constexpr int kPositionSets = 32;
  const std::int64_t slots = c.tokens < 64 ? c.tokens : 64;
  const std::int64_t tokens_per_slot = c.tokens / slots;
  KvCacheConfig config;
  config.slots = slots;
  config.n_kv_heads = c.n_kv_heads;
  config.capacity = kPositionSets * tokens_per_slot;
  config.head_dim = c.head_dim;
  config.kind = LayerKind::ring;
  config.v_format = c.v_format;
  config.device = Device::cuda;
  config.page_size = c.page_size;
  config.pages = c.page_size > 0 ? slots * pages_per_slot(config) : 0;
  KvCache cache(config);
  // Every page once, in shuffled order, so consecutive logical rows do not sit side by side.
  std::vector<std::int32_t> table(static_cast<std::size_t>(config.pages));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  std::shuffle(table.begin(), table.end(), std::mt19937(7));
  Buffer table_buffer(Device::cuda, std::max<std::int64_t>(4, config.pages * 4));
  table_buffer.copy_from_host(table.data(), config.pages * 4);
  const KvCacheView view =
      c.page_size > 0 ? cache.view(table_buffer.view(DType::i32, {slots, pages_per_slot(config)}))
                      : cache.view();

  const std::int64_t values = c.tokens * c.n_kv_heads * c.head_dim;
  const auto in_bytes = static_cast<std::int64_t>(dtype_bytes(c.input));
  Buffer k(Device::cuda, values * in_bytes), v(Device::cuda, values * in_bytes);
  fill_uniform(k.data(), c.input, values, 11, stream);
  fill_uniform(v.data(), c.input, values, 12, stream);
  std::vector<std::int32_t> slot_ids(static_cast<std::size_t>(c.tokens));
  std::vector<std::int32_t> positions(static_cast<std::size_t>(c.tokens * kPositionSets));
  for (std::int64_t set = 0; set < kPositionSets; ++set) {
    for (std::int64_t t = 0; t < c.tokens; ++t) {
      slot_ids[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(t % slots);
      positions[static_cast<std::size_t>(set * c.tokens + t)] =
          static_cast<std::int32_t>(set * tokens_per_slot + t / slots);
    }
  }
  Buffer slot_buffer(Device::cuda, c.tokens * 4),
      position_buffer(Device::cuda, c.tokens * 4 * kPositionSets);
  slot_buffer.copy_from_host(slot_ids.data(), slot_buffer.bytes());
  position_buffer.copy_from_host(positions.data(), position_buffer.bytes());

  const TensorView k_view = k.view(c.input, {c.tokens, c.n_kv_heads, c.head_dim});
  const TensorView v_view = v.view(c.input, {c.tokens, c.n_kv_heads, c.head_dim});
  const TensorView slot_view = slot_buffer.view(DType::i32, {c.tokens});
  const auto position_view = [&](int call) {
    return position_buffer.view(DType::i32, {c.tokens}, (call % kPositionSets) * c.tokens * 4);
  };
  append_kv(view, k_view, v_view, slot_view, position_view(0), Stream{stream});
  const auto launch = [&](int call) {
    cuda::append_kv(view, k_view, v_view, slot_view, position_view(call), Stream{stream});
  };
  const double eager_us = median_event_us(stream, warmup, reps, launch);
  const double graph_us = median_graph_us(stream, graph_calls, reps, launch);
  const std::int64_t bytes = append_bytes(c);
  // The bandwidth kernel reading as many bytes, in the same graph setting: below it no launch
  // that moves them can go.
  const int blocks = read_stream_blocks(cuda_sm_count());
  Buffer same_bytes(Device::cuda, (bytes + 15) / 16 * 16), sink(Device::cuda, 4 * blocks);
  const double read_stream_us = median_graph_us(stream, graph_calls, reps, [&](int) {
    launch_read_stream(same_bytes.data(), same_bytes.bytes(), static_cast<unsigned*>(sink.data()),
                       blocks, stream);
  });
  // The append's own bytes and places with no conversion or encoding, rows located beforehand:
  // what the cache's layout alone costs the memory system (contiguous against paged).
  std::vector<int2> locations;
  for (int set = 0; set < kPositionSets; ++set) {
    const std::vector<int2> of_set = row_locations(
        view, table, slot_ids.data(), positions.data() + set * c.tokens, c.tokens);
    locations.insert(locations.end(), of_set.begin(), of_set.end());
  }
  Buffer location_buffer(Device::cuda, static_cast<std::int64_t>(locations.size() * sizeof(int2)));
  location_buffer.copy_from_host(locations.data(), location_buffer.bytes());
  const auto* device_locations = static_cast<const int2*>(location_buffer.data());
  const double row_copy_us = median_graph_us(stream, graph_calls, reps, [&](int call) {
    launch_row_copy_floor(view, k_view, v_view,
                          device_locations + (call % kPositionSets) * c.tokens, stream);
  });
  return {{"n_kv_heads", c.n_kv_heads},
          {"head_dim", c.head_dim},
          {"k_format", "f16"},
          {"v_format", format_name(c.v_format)},
          {"input", dtype_name(c.input)},
          {"tokens", c.tokens},
          {"page_size", c.page_size},
          {"bytes", bytes},
          {"eager_us", eager_us},
          {"graph_us", graph_us},
          {"graph_gbps", static_cast<double>(bytes) / (graph_us * 1e3)},
          {"read_stream_same_bytes_graph_us", read_stream_us},
          {"row_copy_floor_graph_us", row_copy_us}};
}

}  // namespace turbodecode::bench
