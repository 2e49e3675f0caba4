// Tensor files as the subcommands use them: pick a tensor out of a .npy or .safetensors file,
// widen its values, and write results in the format the output path names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "turbodecode/io.h"

namespace turbodecode::cli {

// Throws InvalidArgument(path, ...) unless the path ends in .npy or .safetensors.
void check_tensor_file_name(const std::string& path);

// Reads a .npy file, or tensor `name` of a .safetensors file (any name when the file holds a
// single tensor and `name` is empty). The extension decides the format.
HostTensor read_tensor_file(const std::string& path, const std::string& name);
// Tensor `name` of a .safetensors file, or nullopt when the file has none of that name.
std::optional<HostTensor> find_tensor(const NamedTensors& tensors, const std::string& name);

// Values of an f32, f16 or bf16 tensor as f32; throws InvalidArgument(argument, ...) otherwise.
std::vector<float> values_as_f32(const HostTensor& tensor, const std::string& argument);
// Values of an i32 tensor; throws InvalidArgument(argument, ...) otherwise.
std::vector<std::int32_t> values_as_i32(const HostTensor& tensor, const std::string& argument);

// The same data with another shape of equal element count.
HostTensor reshaped(HostTensor tensor, std::vector<std::int64_t> shape,
                    const std::string& argument);

// Writes .npy (exactly one tensor) or .safetensors (any number), by the path's extension.
void write_tensor_file(const std::string& path, const NamedTensors& tensors);

}  // namespace turbodecode::cli
