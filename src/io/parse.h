// The .npy and .safetensors parsers over a whole file held in memory: the core of read_npy and
// read_safetensors, and what the fuzz harnesses (fuzz/) feed with arbitrary bytes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "turbodecode/io.h"

namespace turbodecode::io {

// `name` is the file's path: errors throw InvalidArgument(name, ...). Every size in a header is
// checked against the bytes present before anything is allocated for it.
HostTensor parse_npy(std::span<const std::byte> file, const std::filesystem::path& name);
NamedTensors parse_safetensors(std::span<const std::byte> file, const std::filesystem::path& name);

}  // namespace turbodecode::io
