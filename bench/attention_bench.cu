// Decode attention and quantize-on-append on the GPU, against the card's own read-stream
// bandwidth measured in the same run (SPEC §6). docs/benchmarks.md says what is counted.
//   attention_bench [--quick] [--json PATH]   run and write results as JSON
//     --only LABEL_PART      only the decode shapes whose label contains it
//     --chunk-positions N    cut every row into chunks of N positions (A/B of the chunk policy)
//   attention_bench --list-shapes PATH        write the decode shapes (for the PyTorch peer)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "append_measure.cuh"
#include "attention/cuda/decode_cuda.h"
#include "decode_shapes.h"
#include "gpu_timing.cuh"
#include "turbodecode/attention.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::bench {
namespace {

using nlohmann::json;

// Below this a cache could stay in the 60 MB L2 between calls: rotate among several.
constexpr std::int64_t kRotationBytes = std::int64_t{200} << 20;
constexpr int kMaxRotation = 32;
constexpr std::int64_t kFillChunkTokens = 16384;

struct Settings {
  bool quick = false;
  int warmup = 5;
  int reps = 30;
  int graph_calls = 8;
  std::int64_t bandwidth_bytes = std::int64_t{4} << 30;
  std::string only;  // run only the decode shapes whose label contains this (for profiling)
  std::int64_t chunk_positions = 0;  // > 0: DecodeOptions::fixed_chunk_positions (A/B runs)
};

KvCacheConfig cache_config(const DecodeShape& shape) {
  KvCacheConfig config;
  config.slots = shape.batch();
  config.n_kv_heads = shape.n_kv_heads;
  config.capacity = shape.max_length();
  config.head_dim = shape.head_dim;
  config.kind = LayerKind::linear;
  config.k_format = shape.k_format;
  config.v_format = shape.v_format;
  config.device = Device::cuda;
  if (shape.page_size > 0) {
    config.page_size = shape.page_size;
    config.pages = config.slots * ((config.capacity + shape.page_size - 1) / shape.page_size);
  }
  return config;
}

// A shuffled block table naming every page once (paged caches), on the device.
Buffer shuffled_block_table(const KvCacheConfig& config, unsigned seed) {
  std::vector<std::int32_t> table(static_cast<std::size_t>(config.pages));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  std::mt19937 rng(seed);
  std::shuffle(table.begin(), table.end(), rng);
  Buffer buffer(Device::cuda, config.pages * 4);
  buffer.copy_from_host(table.data(), config.pages * 4);
  return buffer;
}

// Bytes a decode step must move: every visible K and V row (codes or F16, and their scales)
// once per KV head, the queries and the outputs (f32), and the two index arrays.
std::int64_t decode_bytes(const DecodeShape& shape) {
  const int d = shape.head_dim;
  const auto stored_row = [d](RowFormat format) {
    return row_bytes(format, d) + 4 * row_scales(format, d);
  };
  const std::int64_t per_position =
      shape.n_kv_heads * (stored_row(shape.k_format) + stored_row(shape.v_format));
  const std::int64_t per_query = 2 * std::int64_t{shape.n_heads} * d * 4 + 2 * 4;
  return shape.total_length() * per_position + shape.batch() * shape.query_tokens * per_query;
}

// Appends positions 0..lengths[b]−1 of every slot b with uniform random K and V (f32), in
// chunks, through the public append_kv.
void fill_cache(const KvCacheView& cache, const std::vector<std::int64_t>& lengths,
                unsigned long long seed, cudaStream_t stream) {
  const KvCacheConfig& c = cache.config;
  const std::int64_t values = kFillChunkTokens * c.n_kv_heads * c.head_dim;
  Buffer k(Device::cuda, values * 4), v(Device::cuda, values * 4);
  Buffer slot_buffer(Device::cuda, kFillChunkTokens * 4),
      position_buffer(Device::cuda, kFillChunkTokens * 4);
  std::vector<std::int32_t> slots, positions;
  const auto flush = [&] {
    const auto n = static_cast<std::int64_t>(slots.size());
    if (n == 0) return;
    fill_uniform(k.data(), DType::f32, values, seed++, stream);
    fill_uniform(v.data(), DType::f32, values, seed++, stream);
    slot_buffer.copy_from_host(slots.data(), n * 4);
    position_buffer.copy_from_host(positions.data(), n * 4);
    append_kv(cache, k.view(DType::f32, {n, c.n_kv_heads, c.head_dim}),
              v.view(DType::f32, {n, c.n_kv_heads, c.head_dim}), slot_buffer.view(DType::i32, {n}),
              position_buffer.view(DType::i32, {n}), Stream{stream});
    slots.clear();
    positions.clear();
  };
  for (std::size_t slot = 0; slot < lengths.size(); ++slot) {
    for (std::int64_t p = 0; p < lengths[slot]; ++p) {
      slots.push_back(static_cast<std::int32_t>(slot));
      positions.push_back(static_cast<std::int32_t>(p));
      if (static_cast<std::int64_t>(slots.size()) == kFillChunkTokens) flush();
    }
  }
  flush();
}

int rotation_count(std::int64_t cache_bytes) {
  if (cache_bytes >= kRotationBytes) return 1;
  const std::int64_t needed = (kRotationBytes + cache_bytes - 1) / cache_bytes;
  return static_cast<int>(needed < 2 ? 2 : (needed > kMaxRotation ? kMaxRotation : needed));
}

// Counts the non-finite values of the output of one validated call (a smoke check: the
// benchmark does not judge accuracy, the tests do).
std::int64_t non_finite_outputs(const Buffer& out) {
  std::vector<float> host(static_cast<std::size_t>(out.bytes() / 4));
  out.copy_to_host(host.data(), out.bytes());
  std::int64_t bad = 0;
  for (float x : host) bad += std::isfinite(x) ? 0 : 1;
  return bad;
}

json measure_decode(const DecodeShape& shape, const Settings& settings, double read_stream_gbps,
                    cudaStream_t stream) {
  const KvCacheConfig config = cache_config(shape);
  const std::int64_t cache_bytes =
      bytes_per_position(config) * config.slots * config.n_kv_heads * config.capacity;
  const int rotation = rotation_count(cache_bytes);
  std::vector<KvCache> caches;
  std::vector<Buffer> tables;
  std::vector<KvCacheView> views;
  caches.reserve(static_cast<std::size_t>(rotation));
  for (int r = 0; r < rotation; ++r) {
    caches.emplace_back(config);
    if (config.page_size > 0) {
      tables.push_back(shuffled_block_table(config, static_cast<unsigned>(r + 1)));
      views.push_back(caches.back().view(
          tables.back().view(DType::i32, {config.slots, pages_per_slot(config)})));
    } else {
      views.push_back(caches.back().view());
    }
    fill_cache(views.back(), shape.lengths, 1000ull * (r + 1), stream);
  }
  const std::int64_t rows = shape.batch() * shape.query_tokens;
  const int d = shape.head_dim;
  Buffer q(Device::cuda, rows * shape.n_heads * d * 4),
      out(Device::cuda, rows * shape.n_heads * d * 4);
  fill_uniform(q.data(), DType::f32, rows * shape.n_heads * d, 7, stream);
  std::vector<std::int32_t> slot_ids, seq_pos;
  for (std::int64_t b = 0; b < shape.batch(); ++b) {
    const std::int64_t length = shape.lengths[static_cast<std::size_t>(b)];
    for (int t = 0; t < shape.query_tokens; ++t) {
      slot_ids.push_back(static_cast<std::int32_t>(b));
      seq_pos.push_back(static_cast<std::int32_t>(length - shape.query_tokens + t));
    }
  }
  Buffer slot_buffer(Device::cuda, rows * 4), pos_buffer(Device::cuda, rows * 4);
  slot_buffer.copy_from_host(slot_ids.data(), rows * 4);
  pos_buffer.copy_from_host(seq_pos.data(), rows * 4);

  DecodeOptions options;
  options.n_heads = shape.n_heads;
  options.query_tokens = shape.query_tokens;
  options.fixed_chunk_positions = settings.chunk_positions;
  const DecodePlan plan = plan_decode(config, options, rows);
  Buffer workspace(Device::cuda, plan.workspace_bytes > 0 ? plan.workspace_bytes : 256);
  workspace.fill_bytes(0);
  const TensorView q_view = q.view(DType::f32, {rows, shape.n_heads, d});
  const TensorView out_view = out.view(DType::f32, {rows, shape.n_heads, d});
  const TensorView slot_view = slot_buffer.view(DType::i32, {rows});
  const TensorView pos_view = pos_buffer.view(DType::i32, {rows});
  const TensorView ws_view = workspace.view(DType::u8, {workspace.bytes()});

  // One validated call (the public entry checks every index on the host) before timing.
  out.fill_bytes(0xFF);
  run_decode(plan, views[0], q_view, slot_view, pos_view, out_view, ws_view, Stream{stream});
  synchronize(Stream{stream});
  const std::int64_t bad_outputs = non_finite_outputs(out);

  // Eager: the CUDA backend straight, as the public call minus its host-side index check.
  const double eager_us = median_event_us(stream, settings.warmup, settings.reps, [&](int i) {
    cuda::run_decode(plan, views[static_cast<std::size_t>(i % rotation)], q_view, slot_view,
                     pos_view, DecodeShard{}, out_view, TensorView{}, ws_view, Stream{stream});
  });
  // Graph: the public call captured (it skips the host check while capturing).
  const int calls = rotation > settings.graph_calls ? rotation : settings.graph_calls;
  const double graph_us = median_graph_us(stream, calls, settings.reps, [&](int i) {
    run_decode(plan, views[static_cast<std::size_t>(i % rotation)], q_view, slot_view, pos_view,
               out_view, ws_view, Stream{stream});
  });
  const std::int64_t bytes = decode_bytes(shape);
  const double best_us = graph_us < eager_us ? graph_us : eager_us;
  // The bandwidth kernel reading as many bytes, from as many rotated buffers, in the same graph
  // setting: no launch that reads the shape's bytes from beyond L2 is faster.
  const int blocks = read_stream_blocks(cuda_sm_count());
  const std::int64_t slice = (bytes + 255) / 256 * 256;
  Buffer same_bytes(Device::cuda, slice * rotation), sink(Device::cuda, 4 * blocks);
  const double read_stream_us = median_graph_us(stream, calls, settings.reps, [&](int i) {
    launch_read_stream(static_cast<const unsigned char*>(same_bytes.data()) + i % rotation * slice,
                       slice, static_cast<unsigned*>(sink.data()), blocks, stream);
  });
  // The same bytes through the data flow of a split decode (an index word first, a merge by
  // the last block to finish), also a dependent launch: what no decode that spreads a row over
  // the SMs can beat.
  Buffer floor_scratch(Device::cuda, 4 * (blocks + 2));
  floor_scratch.fill_bytes(0);
  const double split_floor_us = median_graph_us(stream, calls, settings.reps, [&](int i) {
    launch_split_read_floor(
        static_cast<const unsigned char*>(same_bytes.data()) + i % rotation * slice, slice,
        static_cast<const std::int32_t*>(pos_buffer.data()),
        static_cast<unsigned*>(floor_scratch.data()), blocks, stream);
  });
  json result = shape.to_json();
  result.update(
      {{"bytes", bytes},
       {"cache_bytes", cache_bytes},
       {"rotated_caches", rotation},
       {"eager_us", eager_us},
       {"graph_us", graph_us},
       {"eager_gbps", static_cast<double>(bytes) / (eager_us * 1e3)},
       {"graph_gbps", static_cast<double>(bytes) / (graph_us * 1e3)},
       {"pct_read_stream", 100.0 * static_cast<double>(bytes) / (best_us * 1e3) / read_stream_gbps},
       {"read_stream_same_bytes_graph_us", read_stream_us},
       {"split_read_floor_graph_us", split_floor_us},
       {"max_chunks", plan.max_chunks},
       {"non_finite_outputs", bad_outputs}});
  return result;
}

json device_info() {
  int device = 0;
  TD_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  TD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int runtime = 0, driver = 0;
  TD_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  TD_CUDA_CHECK(cudaDriverGetVersion(&driver));
  return {{"name", prop.name},
          {"sm_count", prop.multiProcessorCount},
          {"l2_bytes", prop.l2CacheSize},
          {"memory_bytes", prop.totalGlobalMem},
          {"cuda_runtime", runtime},
          {"cuda_driver", driver}};
}

void print_decode_row(const json& r) {
  if (r.contains("error")) {
    std::printf("%-44s ERROR %s\n", r.value("label", std::string("?")).c_str(),
                r["error"].get<std::string>().c_str());
    return;
  }
  std::printf("%-44s %9.1f %9.1f %8.0f %6.1f%% %9.1f %4s\n", r["label"].get<std::string>().c_str(),
              r["eager_us"].get<double>(), r["graph_us"].get<double>(),
              r["graph_gbps"].get<double>(), r["pct_read_stream"].get<double>(),
              r["read_stream_same_bytes_graph_us"].get<double>(),
              r["non_finite_outputs"].get<std::int64_t>() == 0 ? "ok" : "NaN");
}

void print_append_row(const json& r, double read_stream_gbps) {
  if (r.contains("error")) {
    std::printf("append ERROR %s\n", r["error"].get<std::string>().c_str());
    return;
  }
  const std::string label =
      "D" + std::to_string(r["head_dim"].get<int>()) + " " +
      std::to_string(r["n_kv_heads"].get<int>()) + "kv V " + r["v_format"].get<std::string>() +
      " in " + r["input"].get<std::string>() + " " +
      std::to_string(r["tokens"].get<std::int64_t>()) + " tok" +
      (r["page_size"].get<int>() > 0 ? " P" + std::to_string(r["page_size"].get<int>())
                                     : std::string());
  std::printf("%-40s %8.1f %8.1f %8.0f %6.1f%% %10.2f %10.2f\n", label.c_str(),
              r["eager_us"].get<double>(), r["graph_us"].get<double>(),
              r["graph_gbps"].get<double>(),
              100.0 * r["graph_gbps"].get<double>() / read_stream_gbps,
              r["read_stream_same_bytes_graph_us"].get<double>(),
              r["row_copy_floor_graph_us"].get<double>());
}

// Runs `measure` and returns its result, or {"error": ...} merged into `context` when it throws
// (a failed shape must not stop the rest of the run).
template <class Measure>
json guarded(json context, const Measure& measure) {
  try {
    return measure();
  } catch (const std::exception& e) {
    context["error"] = e.what();
    return context;
  }
}

int run(const Settings& settings, const std::string& json_path) {
  cudaStream_t stream = nullptr;
  // A blocking stream: it stays ordered with the synchronous copies and memsets the library's
  // Buffer issues on the legacy default stream (index arrays, output poisoning).
  TD_CUDA_CHECK(cudaStreamCreate(&stream));
  json report = {
      {"benchmark", "attention_bench"}, {"quick", settings.quick}, {"device", device_info()}};
  const Bandwidth bw =
      measure_bandwidth(settings.bandwidth_bytes, settings.reps, cuda_sm_count(), stream);
  report["bandwidth"] = {{"read_stream_gbps", bw.read_stream_gbps},
                         {"copy_gbps", bw.copy_gbps},
                         {"buffer_bytes", bw.buffer_bytes}};
  std::printf("device %s: read-stream %.0f GB/s, copy (read+write) %.0f GB/s\n\n",
              report["device"]["name"].get<std::string>().c_str(), bw.read_stream_gbps,
              bw.copy_gbps);

  std::printf("%-44s %9s %9s %8s %7s %9s\n", "decode shape", "eager us", "graph us", "GB/s",
              "%read", "floor us");
  json decode = json::array();
  for (const DecodeShape& shape : decode_shapes(settings.quick)) {
    if (!settings.only.empty() && shape.label().find(settings.only) == std::string::npos) continue;
    decode.push_back(guarded(shape.to_json(), [&] {
      return measure_decode(shape, settings, bw.read_stream_gbps, stream);
    }));
    print_decode_row(decode.back());
    std::fflush(stdout);
  }
  report["decode"] = decode;

  std::printf("\n%-40s %8s %8s %8s %7s %10s %10s\n", "append (K f16)", "eager us", "graph us",
              "GB/s", "%read", "read us", "copy us");
  json append = json::array();
  for (const AppendCase& c : append_cases(settings.quick)) {
    append.push_back(guarded(json{{"head_dim", c.head_dim}}, [&] {
      return measure_append(c, settings.warmup, settings.reps, settings.graph_calls, stream);
    }));
    print_append_row(append.back(), bw.read_stream_gbps);
  }
  report["append"] = append;
  report["launch_floor_graph_us"] =
      launch_floor_graph_us(stream, settings.graph_calls, settings.reps);
  std::printf("empty dependent launch, same graph setting: %.2f us per call\n",
              report["launch_floor_graph_us"].get<double>());
  TD_CUDA_CHECK(cudaStreamDestroy(stream));

  if (!json_path.empty()) std::ofstream(json_path) << report.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace turbodecode::bench

int main(int argc, char** argv) {
  using namespace turbodecode::bench;
  Settings settings;
  std::string json_path, shapes_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      settings.quick = true;
      settings.reps = 10;
      settings.warmup = 3;
      settings.bandwidth_bytes = std::int64_t{1} << 30;
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--list-shapes" && i + 1 < argc) {
      shapes_path = argv[++i];
    } else if (arg == "--only" && i + 1 < argc) {
      settings.only = argv[++i];
    } else if (arg == "--chunk-positions" && i + 1 < argc) {
      settings.chunk_positions = std::stoll(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--only LABEL_PART] [--chunk-positions N] [--json PATH] | "
                   "--list-shapes PATH "
                   "[--quick]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    if (!shapes_path.empty()) {
      nlohmann::json shapes = nlohmann::json::array();
      for (const DecodeShape& shape : decode_shapes(settings.quick))
        shapes.push_back(shape.to_json());
      std::ofstream(shapes_path) << shapes.dump(2) << "\n";
      return 0;
    }
    if (!turbodecode::cuda_available()) {
      std::fprintf(stderr, "attention_bench: no CUDA device\n");
      return 1;
    }
    return run(settings, json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attention_bench: %s\n", e.what());
    return 1;
  }
}
