// The CLI's parts, one file each: the main job (a decode simulation, run when no subcommand is
// given) and the subcommands. Each adds its options to `app` and returns how to run it once
// they are parsed; the options live as long as that.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

#include "input_limits.h"

namespace turbodecode::cli {

struct Command {
  CLI::App* app = nullptr;  // the subcommand
  std::function<void()> run;
};

// The main job's options live on the top-level app; no subcommand takes them.
struct MainJob {
  std::vector<CLI::Option*> options;
  std::function<void()> run;
};

MainJob register_main_job(CLI::App& app);
Command register_encode_command(CLI::App& app);
Command register_attention_command(CLI::App& app, const InputLimits& limits);
Command register_hc_command(CLI::App& app);

}  // namespace turbodecode::cli
