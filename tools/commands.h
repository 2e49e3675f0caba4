// The CLI's parts, one file each: the main job (a decode simulation, run when no subcommand is
// given) and the subcommands. Each adds its options to `app` and runs from a CLI11 callback.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace turbodecode::cli {

// The main job's options (a group on the top-level app) and the job itself, run when no
// subcommand is given.
struct MainJob {
  CLI::Option_group* options;
  std::function<void()> run;
};
MainJob register_main_job(CLI::App& app);

void register_encode_command(CLI::App& app);
void register_attention_command(CLI::App& app);
void register_hc_command(CLI::App& app);

}  // namespace turbodecode::cli
