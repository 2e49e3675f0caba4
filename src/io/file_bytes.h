// Whole-file reads and writes shared by the .npy and .safetensors codecs.
#pragma once

#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace turbodecode::io {

// The file's bytes; throws InvalidArgument(path, ...) when it cannot be read.
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path);

// Writes `parts` back to back, replacing the file; throws InvalidArgument(path, ...) on failure.
void write_file_bytes(const std::filesystem::path& path,
                      std::initializer_list<std::string_view> parts);

// Throws InvalidArgument(path, rule) when `ok` is false.
void check_file(bool ok, const std::filesystem::path& path, std::string_view rule);

}  // namespace turbodecode::io
