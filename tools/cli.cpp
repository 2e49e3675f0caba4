#include "cli.h"

#include <algorithm>
#include <exception>
#include <iostream>

#include "global_options.h"
#include "turbodecode/error.h"

namespace turbodecode::cli {

Cli::Cli(const InputLimits& limits)
    : app_(
          "turbodecode: decode attention over hybrid TurboQuant KV caches and DeepSeek-V4 "
          "hyper-connection ops.\nWithout a subcommand, runs the decode simulation (the main "
          "job).",
          "turbodecode") {
  add_global_options(app_);
  main_job_ = register_main_job(app_);
  subcommands_ = {register_encode_command(app_), register_attention_command(app_, limits),
                  register_hc_command(app_)};
  app_.require_subcommand(0, 1);
  // Runs after parsing, before any command touches the library.
  app_.parse_complete_callback([this] {
    const bool main_job_options = std::any_of(main_job_.options.begin(), main_job_.options.end(),
                                              [](const CLI::Option* o) { return o->count() > 0; });
    if (!app_.get_subcommands().empty() && main_job_options) {
      throw InvalidArgument("--context/--steps/--v-formats/--k-format",
                            "apply to the main job only, not to a subcommand");
    }
    apply_global_options();
  });
}

std::optional<int> Cli::parse(int argc, const char* const* argv, std::ostream& err) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app_.exit(error, std::cout, err);
  } catch (const std::exception& error) {
    err << "turbodecode: error: " << error.what() << "\n";
    return 1;
  }
  return std::nullopt;
}

std::string Cli::command() const {
  for (const Command& subcommand : subcommands_) {
    if (subcommand.app->parsed()) return subcommand.app->get_name();
  }
  return "";
}

int Cli::run(std::ostream& err) const {
  try {
    for (const Command& subcommand : subcommands_) {
      if (subcommand.app->parsed()) {
        subcommand.run();
        return 0;
      }
    }
    main_job_.run();
  } catch (const std::exception& error) {
    err << "turbodecode: error: " << error.what() << "\n";
    return 1;
  }
  return 0;
}

int run_cli(int argc, const char* const* argv, std::ostream& err) {
  Cli cli;
  if (const std::optional<int> status = cli.parse(argc, argv, err)) return *status;
  return cli.run(err);
}

}  // namespace turbodecode::cli
