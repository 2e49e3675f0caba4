// CLI11 validators for options whose rule lives in the library or needs a finite number, so a
// bad value is rejected while parsing, with the flag's name, before anything runs.
#pragma once

#include <CLI/CLI.hpp>

namespace turbodecode::cli {

// A row format the library knows (parse_format's names).
CLI::Validator row_format_name();
// A row format decode attention reads K in (plan_decode's rule).
CLI::Validator key_format_name();
// A finite number >= 0.
CLI::Validator finite_non_negative();
// A finite number > 0.
CLI::Validator finite_positive();
// A path ending in .npy or .safetensors (an output the CLI writes).
CLI::Validator tensor_file_name();

}  // namespace turbodecode::cli
