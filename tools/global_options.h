// Options every part of the CLI shares: the backend, the CPU thread count, the random seed and
// machine-readable output.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "turbodecode/tensor.h"

namespace turbodecode::cli {

struct GlobalOptions {
  Device device = Device::cpu;
  int threads = 0;  // 0: TURBODECODE_THREADS, else every hardware thread
  std::uint64_t seed = 20261129;
  bool json = false;
};

// Help footer of subcommands, which accept the global options too.
inline constexpr const char* kGlobalOptionsFooter =
    "Global options (see turbodecode --help) apply here too: --device cpu|cuda, --threads N, "
    "--seed S, --json.";

// Adds subcommand `name`, its help ending with kGlobalOptionsFooter.
CLI::App* add_command(CLI::App& app, const char* name, const char* description);

// Adds --device, --threads, --seed and --json to the top-level app (subcommands see them
// through CLI11's fallthrough, so they may follow the subcommand name), resetting their values
// to the defaults.
void add_global_options(CLI::App& app);

// The parsed values; valid once CLI11 has parsed the command line.
const GlobalOptions& global_options();

// Applies --threads and checks --device; call after parsing, before any library call.
void apply_global_options();

}  // namespace turbodecode::cli
