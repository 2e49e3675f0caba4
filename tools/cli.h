// The CLI as a library: what `main` runs, callable in process on any argv (tests, the fuzz
// harness fuzz/cli_fuzzer.cc). Parsing and running are separate steps, so a caller may parse
// an argv without running the command it selects.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "commands.h"
#include "input_limits.h"

namespace turbodecode::cli {

class Cli {
 public:
  // Every option and subcommand, with default values. One Cli at a time: the global options
  // (--device, --threads, --seed, --json) are process-wide.
  explicit Cli(const InputLimits& limits = {});

  // Parses argv (argv[0] is the program name) and checks the options. Returns the exit status
  // when parsing ends the run (--help: 0; a usage error or an invalid option: non-zero, its
  // message written to `err`), else nullopt: command() is ready to run.
  std::optional<int> parse(int argc, const char* const* argv, std::ostream& err);
  // The parsed command's name: a subcommand, or "" for the main job.
  std::string command() const;
  // Runs the parsed command; returns 0, or 1 after writing its error to `err`.
  int run(std::ostream& err) const;

 private:
  CLI::App app_;
  MainJob main_job_;
  std::vector<Command> subcommands_;
};

// Parses and runs as the `turbodecode` binary does; returns its exit status.
int run_cli(int argc, const char* const* argv, std::ostream& err);

}  // namespace turbodecode::cli
