// The main job's options (on the top-level app) and its run: `turbodecode` alone.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "decode_simulation.h"
#include "global_options.h"
#include "option_checks.h"
#include "simulation_report.h"

namespace turbodecode::cli {
namespace {

constexpr std::int64_t kMaxContext = std::int64_t{1} << 16;

struct MainJobOptions {
  std::int64_t context = 8192;
  int steps = 32;
  std::vector<std::string> v_formats = {"tq3", "tq4", "tq5", "tq6", "tq8", "fp8", "f16"};
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
  auto options = std::make_shared<MainJobOptions>();
  // Options of the top-level app, shown under their own heading. (Not a CLI11 option group:
  // CLI11 2.1 takes an empty argument for the group's empty name and then loops forever.)
  constexpr const char* kGroup = "Main job (decode simulation, run when no subcommand is given)";
  MainJob job;
  // The synthetic K/V of both layers and their device copies take about 48 KB per token.
  job.options.push_back(
      app.add_option("--context", options->context, "Tokens appended before decoding")
          ->check(CLI::Range(std::int64_t{1}, kMaxContext))
          ->capture_default_str());
  job.options.push_back(app.add_option("--steps", options->steps, "Decode steps measured")
                            ->check(CLI::Range(1, 1 << 16))
                            ->capture_default_str());
  job.options.push_back(
      app.add_option("--v-formats", options->v_formats,
                     "V formats to measure, comma-separated (f16, fp8, tq3, tq4, tq5, tq6, tq8)")
          ->delimiter(',')
          ->check(row_format_name())
          ->capture_default_str());
  job.options.push_back(app.add_option("--k-format", options->k_format,
                                       "K format: f16 (hybrid cache), fp8, tq4 or tq8 "
                                       "(all-quantized)")
                            ->check(key_format_name())
                            ->capture_default_str());
  for (CLI::Option* option : job.options) option->group(kGroup);
  job.run = [options] { run_main_job(*options); };
  return job;
}

}  // namespace turbodecode::cli
