#include "simulation_report.h"

#include <fmt/format.h>

#include <string>

namespace turbodecode::cli {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

const char* kind_name(LayerKind kind) {
  return kind == LayerKind::ring ? "ring" : "linear";
}

std::string layer_summary(const SimulatedLayer& layer, std::int64_t capacity) {
  std::string text =
      fmt::format("{} layer: {} cache of {} positions, D {}, {} query / {} KV heads", layer.name,
                  kind_name(layer.kind), capacity, layer.head_dim, layer.n_heads, layer.n_kv_heads);
  if (layer.sliding_window > 0) text += fmt::format(", window {}", layer.sliding_window);
  return text;
}

std::int64_t layer_capacity(const SimulatedLayer& layer, const SimulationConfig& config) {
  return layer.kind == LayerKind::ring ? layer.sliding_window : config.context + config.steps;
}

void print_memory_and_latency(const SimulationOutcome& outcome) {
  fmt::print("\n{:<6} {:>11} {:>8} {:>16} {:>15}\n", "V", "K+V cache", "vs F16", "append context",
             "decode step");
  fmt::print("{:<6} {:>11} {:>8} {:>16} {:>15}\n", "", "MiB", "", "ms (all tokens)", "median ms");
  for (const FormatOutcome& format : outcome.formats) {
    const double ratio =
        static_cast<double>(format.cache_bytes()) / static_cast<double>(format.f16_cache_bytes());
    fmt::print("{:<6} {:>11.2f} {:>7.1f}% {:>16.1f} {:>15.3f}\n", format_name(format.v_format),
               static_cast<double>(format.cache_bytes()) / kMiB, 100.0 * ratio,
               format.context_append_ms, format.median_step_ms());
  }
}

void print_fidelity(const SimulationOutcome& outcome) {
  fmt::print(
      "\nFidelity against exact attention (f64, unquantized f32 K/V), per head row over {} "
      "steps:\n",
      outcome.config.steps);
  fmt::print("{:<6} {:<8} {:>12} {:>12} {:>12}\n", "V", "layer", "cosine mean", "cosine min",
             "max rel err");
  for (const FormatOutcome& format : outcome.formats) {
    for (std::size_t l = 0; l < format.layers.size(); ++l) {
      const Fidelity& fidelity = format.layers[l].fidelity;
      fmt::print("{:<6} {:<8} {:>12.6f} {:>12.6f} {:>12.2e}\n", format_name(format.v_format),
                 outcome.layers[l].name, fidelity.mean_cosine(), fidelity.min_cosine(),
                 fidelity.max_relative_error());
    }
  }
}

}  // namespace

void print_simulation_report(const SimulationOutcome& outcome) {
  const SimulationConfig& config = outcome.config;
  fmt::print("turbodecode decode simulation: {} backend, {} CPU threads, seed {}\n",
             device_name(config.device), outcome.cpu_threads, config.seed);
  fmt::print("context {} tokens, then {} decode steps (append + attention, both layers); K {}\n",
             config.context, config.steps, format_name(config.k_format));
  for (const SimulatedLayer& layer : outcome.layers) {
    fmt::print("  {}\n", layer_summary(layer, layer_capacity(layer, config)));
  }
  print_memory_and_latency(outcome);
  print_fidelity(outcome);
  fmt::print("\nsetup (synthetic data + exact attention) {:.1f} s, total {:.1f} s\n",
             outcome.setup_s, outcome.total_s);
}

nlohmann::ordered_json simulation_json(const SimulationOutcome& outcome) {
  const SimulationConfig& config = outcome.config;
  nlohmann::ordered_json json = {{"device", device_name(config.device)},
                                 {"cpu_threads", outcome.cpu_threads},
                                 {"seed", config.seed},
                                 {"context", config.context},
                                 {"steps", config.steps},
                                 {"k_format", format_name(config.k_format)}};
  for (const SimulatedLayer& layer : outcome.layers) {
    json["layers"].push_back({{"name", layer.name},
                              {"kind", kind_name(layer.kind)},
                              {"capacity", layer_capacity(layer, config)},
                              {"head_dim", layer.head_dim},
                              {"n_heads", layer.n_heads},
                              {"n_kv_heads", layer.n_kv_heads},
                              {"sliding_window", layer.sliding_window}});
  }
  for (const FormatOutcome& format : outcome.formats) {
    nlohmann::ordered_json entry = {{"v_format", format_name(format.v_format)},
                                    {"cache_bytes", format.cache_bytes()},
                                    {"f16_cache_bytes", format.f16_cache_bytes()},
                                    {"context_append_ms", format.context_append_ms},
                                    {"step_ms_median", format.median_step_ms()},
                                    {"step_ms", format.step_ms}};
    for (std::size_t l = 0; l < format.layers.size(); ++l) {
      const LayerOutcome& layer = format.layers[l];
      entry["layers"].push_back({{"name", outcome.layers[l].name},
                                 {"cache_bytes", layer.cache_bytes},
                                 {"f16_cache_bytes", layer.f16_cache_bytes},
                                 {"cosine_mean", layer.fidelity.mean_cosine()},
                                 {"cosine_min", layer.fidelity.min_cosine()},
                                 {"max_relative_error", layer.fidelity.max_relative_error()}});
    }
    json["formats"].push_back(entry);
  }
  json["setup_s"] = outcome.setup_s;
  json["total_s"] = outcome.total_s;
  return json;
}

}  // namespace turbodecode::cli
