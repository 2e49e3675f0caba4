// turbodecode: with no subcommand, a decode simulation on synthetic Gemma-like layers;
// subcommands work on user tensors (.npy / .safetensors).
#include <iostream>

#include "cli.h"

int main(int argc, char** argv) {
  return turbodecode::cli::run_cli(argc, argv, std::cerr);
}
