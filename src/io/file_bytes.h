// Whole-file reads and writes shared by the .npy and .safetensors codecs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "turbodecode/tensor.h"

namespace turbodecode::io {

// The file's bytes; throws InvalidArgument(path, ...) when it cannot be read.
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path);

// Writes `parts` back to back, replacing the file; throws InvalidArgument(path, ...) on failure.
void write_file_bytes(const std::filesystem::path& path,
                      std::initializer_list<std::string_view> parts);

// Bytes of a C-order tensor of `shape`, or nullopt when an extent is negative or the size
// exceeds 2^62 bytes (computed without overflow, so a header's shape can be checked before it
// sizes anything).
std::optional<std::int64_t> tensor_bytes(DType dtype, const std::vector<std::int64_t>& shape);

// Throws InvalidArgument(path, rule) when `ok` is false.
void check_file(bool ok, const std::filesystem::path& path, std::string_view rule);

}  // namespace turbodecode::io
