// What files and flags may ask the CLI to allocate (SPEC §7.1): a request beyond a limit is
// rejected, naming the flag or tensor it came from, before anything is allocated. The limits
// are documented in the subcommands' --help and in the README.
#pragma once

#include <cstdint>

namespace turbodecode::cli {

struct InputLimits {
  // The `attention` subcommand's KV cache: slots × KV heads × capacity × bytes per position.
  std::int64_t cache_bytes = std::int64_t{4} << 30;
};

}  // namespace turbodecode::cli
