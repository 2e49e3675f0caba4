// The main job: decode simulation of a Gemma-like pair of layers over a long synthetic context,
// measuring cache memory, fidelity against exact attention and step latency per V format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fidelity.h"
#include "progress_bar.h"
#include "turbodecode/attention.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::cli {

struct SimulatedLayer {
  std::string name;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  LayerKind kind = LayerKind::linear;
  MaskKind mask = MaskKind::causal;
  std::int64_t sliding_window = 0;  // also the ring's capacity
};

// A Gemma-4-like pair: a sliding-window layer on a ring (D 256, 16 query / 8 KV heads, window
// 1024) and a global layer (D 512, 16 query / 2 KV heads).
std::vector<SimulatedLayer> gemma_like_layers();

struct SimulationConfig {
  std::int64_t context = 8192;  // tokens appended before decoding
  int steps = 32;               // decode steps measured
  std::vector<RowFormat> v_formats;
  RowFormat k_format = RowFormat::f16;
  Device device = Device::cpu;
  std::uint64_t seed = 0;
};

struct LayerOutcome {
  std::int64_t cache_bytes = 0;
  std::int64_t f16_cache_bytes = 0;  // the same layer with F16 K and V
  Fidelity fidelity;                 // decode output vs exact attention, per head row
};

struct FormatOutcome {
  RowFormat v_format = RowFormat::tq8;
  std::vector<LayerOutcome> layers;  // in gemma_like_layers() order
  double context_append_ms = 0.0;    // appending the whole context to both layers
  std::vector<double> step_ms;       // per decode step: append + attention, both layers

  std::int64_t cache_bytes() const;
  std::int64_t f16_cache_bytes() const;
  double median_step_ms() const;
};

struct SimulationOutcome {
  SimulationConfig config;
  std::vector<SimulatedLayer> layers;
  std::vector<FormatOutcome> formats;
  int cpu_threads = 0;
  double setup_s = 0.0;  // synthetic data and exact attention
  double total_s = 0.0;
};

SimulationOutcome run_simulation(const SimulationConfig& config, bool show_progress);

}  // namespace turbodecode::cli
