// turbodecode: with no subcommand, a decode simulation on synthetic Gemma-like layers;
// subcommands work on user tensors (.npy / .safetensors).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "commands.h"
#include "global_options.h"
#include "turbodecode/error.h"

int main(int argc, char** argv) {
  using namespace turbodecode::cli;
  CLI::App app(
      "turbodecode: decode attention over hybrid TurboQuant KV caches and DeepSeek-V4 "
      "hyper-connection ops.\nWithout a subcommand, runs the decode simulation (the main job).",
      "turbodecode");
  add_global_options(app);
  const MainJob main_job = register_main_job(app);
  register_encode_command(app);
  register_attention_command(app);
  register_hc_command(app);
  app.require_subcommand(0, 1);
  // Runs after parsing, before any subcommand's callback touches the library.
  app.parse_complete_callback([&] {
    if (!app.get_subcommands().empty() && main_job.options->count_all() > 0) {
      throw turbodecode::InvalidArgument("--context/--steps/--v-formats/--k-format",
                                         "apply to the main job only, not to a subcommand");
    }
    apply_global_options();
  });

  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) main_job.run();
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "turbodecode: error: %s\n", error.what());
    return 1;
  }
  return 0;
}
