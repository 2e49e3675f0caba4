#include "decode_simulation.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "device_tensor.h"
#include "parallel_for.h"
#include "reference/attention_oracle.h"
#include "synthetic_kv.h"
#include "turbodecode/mask_kind.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cli {
namespace {

// Tokens per append call while filling the context (a prefill-sized batch; never more than a
// ring holds, since one call may not write a row twice).
constexpr std::int64_t kContextChunk = 512;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// What one layer sees in every V format's run: synthetic rows, queries, the exact outputs, and
// device copies of the inputs.
struct LayerInputs {
  SimulatedLayer layer;
  std::int64_t capacity = 0;
  SyntheticRows keys;
  SyntheticRows values;
  std::vector<float> queries;              // [steps, n_heads, D]
  std::vector<std::vector<double>> exact;  // per step: [n_heads, D]
  DeviceTensor k, v, q;
};

// Index arrays shared by every append and decode call: positions[i] = i, and zero slot ids.
struct IndexArrays {
  DeviceTensor positions;
  DeviceTensor slots;
};

// Exact attention of the query at `position` over the unquantized rows it sees.
std::vector<double> exact_output(const LayerInputs& in, std::int64_t position, int step) {
  const SimulatedLayer& layer = in.layer;
  const std::int64_t first =
      visible_positions(layer.mask, position, in.capacity, layer.sliding_window).first;
  const std::int64_t row = static_cast<std::int64_t>(layer.n_kv_heads) * layer.head_dim;
  // Reused per thread: these copies are tens of MB at long contexts.
  thread_local std::vector<float> k, v;
  k.assign(in.keys.rows().begin() + first * row, in.keys.rows().begin() + (position + 1) * row);
  v.assign(in.values.rows().begin() + first * row, in.values.rows().begin() + (position + 1) * row);
  const std::int64_t query = static_cast<std::int64_t>(layer.n_heads) * layer.head_dim;
  const std::vector<float> q(in.queries.begin() + step * query,
                             in.queries.begin() + (step + 1) * query);
  return oracle::exact_attention(q, k, v, layer.n_heads, layer.n_kv_heads, layer.head_dim, 0.0,
                                 0.0);
}

std::unique_ptr<LayerInputs> make_layer_inputs(const SimulatedLayer& layer,
                                               const SimulationConfig& config, int index,
                                               ProgressBar& progress) {
  const std::int64_t total = config.context + config.steps;
  const std::uint64_t seed = config.seed + 1000003ull * static_cast<std::uint64_t>(index);
  progress.advance(0, "synthesising " + layer.name + " K/V");
  SyntheticRows keys(layer.n_kv_heads, layer.head_dim, total, seed);
  SyntheticRows values(layer.n_kv_heads, layer.head_dim, total, seed + 1);
  std::vector<float> queries;
  for (int s = 0; s < config.steps; ++s) {
    const std::vector<float> q = synthetic_query(keys, layer.n_heads, config.context + s, seed + 2);
    queries.insert(queries.end(), q.begin(), q.end());
  }
  const std::vector<std::int64_t> kv_shape = {total, layer.n_kv_heads, layer.head_dim};
  const std::vector<std::int64_t> q_shape = {config.steps, layer.n_heads, layer.head_dim};
  DeviceTensor k(config.device, DType::f32, kv_shape, keys.rows());
  DeviceTensor v(config.device, DType::f32, kv_shape, values.rows());
  DeviceTensor q(config.device, DType::f32, q_shape, queries);
  auto in = std::make_unique<LayerInputs>(
      LayerInputs{layer,
                  layer.kind == LayerKind::ring ? layer.sliding_window : total,
                  std::move(keys),
                  std::move(values),
                  std::move(queries),
                  {},
                  std::move(k),
                  std::move(v),
                  std::move(q)});

  progress.advance(0, "exact attention, " + layer.name + " layer");
  in->exact.resize(static_cast<std::size_t>(config.steps));
  parallel_for(config.steps, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t s = begin; s < end; ++s) {
      in->exact[static_cast<std::size_t>(s)] =
          exact_output(*in, config.context + s, static_cast<int>(s));
    }
  });
  progress.advance(config.steps, "exact attention, " + layer.name + " layer");
  return in;
}

KvCacheConfig cache_config(const LayerInputs& in, RowFormat k_format, RowFormat v_format,
                           Device device) {
  KvCacheConfig config;
  config.n_kv_heads = in.layer.n_kv_heads;
  config.capacity = in.capacity;
  config.head_dim = in.layer.head_dim;
  config.kind = in.layer.kind;
  config.k_format = k_format;
  config.v_format = v_format;
  config.device = device;
  return config;
}

DecodeOptions decode_options(const SimulatedLayer& layer) {
  DecodeOptions options;
  options.n_heads = layer.n_heads;
  options.mask = layer.mask;
  options.sliding_window = layer.sliding_window;
  return options;
}

// One layer's cache and decode state for one V format.
struct LayerRun {
  KvCache cache;
  DecodePlan plan;
  DeviceTensor workspace;
  DeviceTensor out;  // [steps, n_heads, D]

  LayerRun(const KvCacheConfig& config, const SimulatedLayer& layer, int steps)
      : cache(config),
        plan(plan_decode(cache.config(), decode_options(layer), 1)),
        workspace(config.device, DType::u8, {std::max<std::int64_t>(plan.workspace_bytes, 1)},
                  std::vector<std::uint8_t>(
                      static_cast<std::size_t>(std::max<std::int64_t>(plan.workspace_bytes, 1)))),
        out(config.device, DType::f32, {steps, layer.n_heads, layer.head_dim}) {}
};

void append_tokens(const LayerRun& run, const LayerInputs& in, const IndexArrays& indices,
                   std::int64_t first, std::int64_t count) {
  append_kv(run.cache.view(), in.k.rows(first, count), in.v.rows(first, count),
            indices.slots.rows(0, count), indices.positions.rows(first, count));
}

void fill_context(const std::vector<std::unique_ptr<LayerRun>>& runs,
                  const std::vector<std::unique_ptr<LayerInputs>>& inputs,
                  const IndexArrays& indices, std::int64_t context, ProgressBar& progress,
                  const std::string& stage) {
  for (std::int64_t first = 0; first < context; first += kContextChunk) {
    const std::int64_t count = std::min(kContextChunk, context - first);
    for (std::size_t l = 0; l < runs.size(); ++l)
      append_tokens(*runs[l], *inputs[l], indices, first, count);
    synchronize();
    progress.advance(1, stage);
  }
}

FormatOutcome run_format(RowFormat v_format, const SimulationConfig& config,
                         const std::vector<std::unique_ptr<LayerInputs>>& inputs,
                         const IndexArrays& indices, ProgressBar& progress) {
  FormatOutcome outcome;
  outcome.v_format = v_format;
  const std::string stage = std::string("V ") + format_name(v_format);
  std::vector<std::unique_ptr<LayerRun>> runs;
  for (const auto& in : inputs) {
    const KvCacheConfig cache = cache_config(*in, config.k_format, v_format, config.device);
    runs.push_back(std::make_unique<LayerRun>(cache, in->layer, config.steps));
    LayerOutcome layer;
    layer.cache_bytes = bytes_per_position(cache) * cache.n_kv_heads * cache.capacity;
    const KvCacheConfig f16 = cache_config(*in, RowFormat::f16, RowFormat::f16, config.device);
    layer.f16_cache_bytes = bytes_per_position(f16) * f16.n_kv_heads * f16.capacity;
    outcome.layers.push_back(layer);
  }

  // One untimed chunk first: the first append of a run pays one-time costs (lazily built
  // tables, cold caches and pages) that are not append throughput. The timed fill rewrites it.
  for (std::size_t l = 0; l < runs.size(); ++l) {
    append_tokens(*runs[l], *inputs[l], indices, 0, std::min(kContextChunk, config.context));
  }
  synchronize();
  const Clock::time_point fill_start = Clock::now();
  fill_context(runs, inputs, indices, config.context, progress, stage + ": appending context");
  outcome.context_append_ms = ms_since(fill_start);

  for (int s = 0; s < config.steps; ++s) {
    const std::int64_t position = config.context + s;
    const Clock::time_point step_start = Clock::now();
    for (std::size_t l = 0; l < runs.size(); ++l) {
      const LayerRun& run = *runs[l];
      append_tokens(run, *inputs[l], indices, position, 1);
      run_decode(run.plan, run.cache.view(), inputs[l]->q.rows(s, 1), indices.slots.rows(0, 1),
                 indices.positions.rows(position, 1), run.out.rows(s, 1), run.workspace.view());
    }
    synchronize();
    outcome.step_ms.push_back(ms_since(step_start));
    progress.advance(1, stage + ": decoding");
  }

  for (std::size_t l = 0; l < runs.size(); ++l) {
    const SimulatedLayer& layer = inputs[l]->layer;
    const std::vector<float> out = runs[l]->out.to_host_values<float>();
    const std::int64_t step_values = static_cast<std::int64_t>(layer.n_heads) * layer.head_dim;
    for (int s = 0; s < config.steps; ++s) {
      outcome.layers[l].fidelity.add_rows(out.data() + s * step_values,
                                          inputs[l]->exact[static_cast<std::size_t>(s)].data(),
                                          layer.n_heads, layer.head_dim);
    }
  }
  return outcome;
}

IndexArrays make_index_arrays(const SimulationConfig& config) {
  std::vector<std::int32_t> positions(static_cast<std::size_t>(config.context + config.steps));
  for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<std::int32_t>(i);
  const std::vector<std::int32_t> slots(static_cast<std::size_t>(kContextChunk), 0);
  return {DeviceTensor(config.device, DType::i32, {static_cast<std::int64_t>(positions.size())},
                       positions),
          DeviceTensor(config.device, DType::i32, {kContextChunk}, slots)};
}

}  // namespace

std::vector<SimulatedLayer> gemma_like_layers() {
  return {{"sliding", 16, 8, 256, LayerKind::ring, MaskKind::sliding_ring, 1024},
          {"global", 16, 2, 512, LayerKind::linear, MaskKind::causal, 0}};
}

std::int64_t FormatOutcome::cache_bytes() const {
  std::int64_t bytes = 0;
  for (const LayerOutcome& layer : layers) bytes += layer.cache_bytes;
  return bytes;
}

std::int64_t FormatOutcome::f16_cache_bytes() const {
  std::int64_t bytes = 0;
  for (const LayerOutcome& layer : layers) bytes += layer.f16_cache_bytes;
  return bytes;
}

double FormatOutcome::median_step_ms() const {
  if (step_ms.empty()) return 0.0;
  std::vector<double> sorted = step_ms;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2),
                   sorted.end());
  return sorted[sorted.size() / 2];
}

SimulationOutcome run_simulation(const SimulationConfig& config, bool show_progress) {
  const Clock::time_point start = Clock::now();
  SimulationOutcome outcome{config, gemma_like_layers(), {}, cpu_threads(), 0.0, 0.0};
  const std::int64_t chunks = (config.context + kContextChunk - 1) / kContextChunk;
  const auto layer_count = static_cast<std::int64_t>(outcome.layers.size());
  ProgressBar progress(
      layer_count * config.steps +
          static_cast<std::int64_t>(config.v_formats.size()) * (chunks + config.steps),
      show_progress);

  std::vector<std::unique_ptr<LayerInputs>> inputs;
  for (int l = 0; l < layer_count; ++l) {
    inputs.push_back(
        make_layer_inputs(outcome.layers[static_cast<std::size_t>(l)], config, l, progress));
  }
  const IndexArrays indices = make_index_arrays(config);
  outcome.setup_s = ms_since(start) / 1000.0;

  for (RowFormat v_format : config.v_formats) {
    outcome.formats.push_back(run_format(v_format, config, inputs, indices, progress));
  }
  outcome.total_s = ms_since(start) / 1000.0;
  return outcome;
}

}  // namespace turbodecode::cli
