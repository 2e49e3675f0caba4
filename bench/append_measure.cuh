// Quantize-on-append benchmark: append_kv of a batch of tokens (one per sequence, as a decode
// step appends them) for every KV head, eager and in CUDA-graph replay, into a contiguous or a
// paged cache (pages in shuffled order). Bytes counted: the k and v inputs, index arrays and
// block table entries read, the K rows, V rows and V side values written. Beside it, the
// bandwidth kernel reading as many bytes in the same graph setting.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cuda/append_cuda.h"
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
          {"read_stream_same_bytes_graph_us", read_stream_us}};
}

}  // namespace turbodecode::bench
