#include "global_options.h"

#include <cstdlib>
#include <string>

#include "turbodecode/buffer.h"
#include "turbodecode/error.h"

namespace turbodecode::cli {
namespace {

GlobalOptions& mutable_options() {
  static GlobalOptions options;
  return options;
}

}  // namespace

CLI::App* add_command(CLI::App& app, const char* name, const char* description) {
  CLI::App* command = app.add_subcommand(name, description);
  command->footer(kGlobalOptionsFooter);
  return command;
}

void add_global_options(CLI::App& app) {
  GlobalOptions& options = mutable_options();
  options = GlobalOptions{};
  app.add_option_function<std::string>(
         "--device",
         [&options](const std::string& name) {
           options.device = name == "cuda" ? Device::cuda : Device::cpu;
         },
         "Backend that runs the kernels (cuda: the GPU backend)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->default_str("cpu");
  app.add_option("--threads", options.threads,
                 "CPU worker threads (0: $TURBODECODE_THREADS, else all hardware threads)")
      ->check(CLI::Range(0, 1024))
      ->default_val(0);
  app.add_option("--seed", options.seed, "Seed of every random input the CLI generates")
      ->capture_default_str();
  app.add_flag("--json", options.json, "Print results as one JSON object on stdout");
  app.fallthrough();
}

const GlobalOptions& global_options() {
  return mutable_options();
}

void apply_global_options() {
  const GlobalOptions& options = global_options();
  // The CPU backend's pool reads its size once, on first use: set it before any library call.
  if (options.threads > 0)
    setenv("TURBODECODE_THREADS", std::to_string(options.threads).c_str(), 1);
  if (options.device == Device::cuda && !cuda_available()) {
    throw InvalidArgument("--device",
                          "cuda needs the CUDA backend (built with nvcc) and a visible GPU");
  }
}

}  // namespace turbodecode::cli
