// The main job's options (on the top-level app) and its run: `turbodecode` alone.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "commands.h"
#include "common/validate.h"
#include "decode_simulation.h"
#include "global_options.h"
#include "simulation_report.h"

namespace turbodecode::cli {
namespace {

struct MainJobOptions {
  std::int64_t context = 8192;
  int steps = 32;
  std::vector<std::string> v_formats = {"tq4", "tq5", "tq6", "tq8", "f16"};
  std::string k_format = "f16";
};

void run_main_job(const MainJobOptions& options) {
  const GlobalOptions& global = global_options();
  SimulationConfig config;
  config.context = options.context;
  config.steps = options.steps;
  for (const std::string& name : options.v_formats) config.v_formats.push_back(parse_format(name));
  config.k_format = parse_format(options.k_format);
  config.device = global.device;
  config.seed = global.seed;
  const SimulationOutcome outcome = run_simulation(config, !global.json);
  if (global.json) {
    fmt::print("{}\n", simulation_json(outcome).dump(2));
  } else {
    print_simulation_report(outcome);
  }
}

}  // namespace

MainJob register_main_job(CLI::App& app) {
  static MainJobOptions options;
  CLI::Option_group* group =
      app.add_option_group("Main job", "Decode simulation, run when no subcommand is given");
  group->add_option("--context", options.context, "Tokens appended before decoding")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
      ->capture_default_str();
  group->add_option("--steps", options.steps, "Decode steps measured")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  group
      ->add_option("--v-formats", options.v_formats,
                   "V formats to measure, comma-separated (f16, fp8, tq3, tq4, tq5, tq6, tq8; "
                   "decode of fp8 and tq3 rows is not supported by this build yet)")
      ->delimiter(',')
      ->capture_default_str();
  group
      ->add_option("--k-format", options.k_format,
                   "K format: f16 (hybrid cache), fp8, or tq3..tq8 (all-quantized; decode of fp8 "
                   "and tq3 rows is not supported by this build yet)")
      ->capture_default_str();
  return {group, [] { run_main_job(options); }};
}

}  // namespace turbodecode::cli
