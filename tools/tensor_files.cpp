#include "tensor_files.h"

#include <algorithm>
#include <filesystem>

#include "argument_check.h"
#include "turbodecode/f16.h"

namespace turbodecode::cli {
namespace {

enum class FileKind { npy, safetensors };

FileKind file_kind(const std::string& path) {
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension == ".npy") return FileKind::npy;
  if (extension == ".safetensors") return FileKind::safetensors;
  throw InvalidArgument(path, "tensor files must end in .npy or .safetensors");
}

std::string names_of(const NamedTensors& tensors) {
  std::string names;
  for (const auto& entry : tensors) names += (names.empty() ? "" : ", ") + entry.first;
  return names.empty() ? "none" : names;
}

}  // namespace

void check_tensor_file_name(const std::string& path) {
  file_kind(path);
}

std::optional<HostTensor> find_tensor(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [tensor_name, tensor] : tensors) {
    if (tensor_name == name) return tensor;
  }
  return std::nullopt;
}

HostTensor read_tensor_file(const std::string& path, const std::string& name) {
  if (file_kind(path) == FileKind::npy) return read_npy(path);
  NamedTensors tensors = read_safetensors(path);
  if (name.empty()) {
    check_arg(tensors.size() == 1, path,
              "holds several tensors (" + names_of(tensors) + "); name one with --name");
    return std::move(tensors.front().second);
  }
  std::optional<HostTensor> tensor = find_tensor(tensors, name);
  check_arg(tensor.has_value(), path,
            "has no tensor named '" + name + "' (it holds: " + names_of(tensors) + ")");
  return std::move(*tensor);
}

std::vector<float> values_as_f32(const HostTensor& tensor, const std::string& argument) {
  const auto n = static_cast<std::size_t>(tensor.numel());
  std::vector<float> values(n);
  const auto* halves = reinterpret_cast<const std::uint16_t*>(tensor.bytes.data());
  switch (tensor.dtype) {
    case DType::f32:
      std::copy_n(reinterpret_cast<const float*>(tensor.bytes.data()), n, values.begin());
      return values;
    case DType::f16:
      for (std::size_t i = 0; i < n; ++i) values[i] = f16_to_f32(halves[i]);
      return values;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) values[i] = bf16_to_f32(halves[i]);
      return values;
    case DType::u8:
    case DType::i32:
      break;
  }
  throw InvalidArgument(
      argument, std::string("must hold f32, f16 or bf16 values, not ") + dtype_name(tensor.dtype));
}

std::vector<std::int32_t> values_as_i32(const HostTensor& tensor, const std::string& argument) {
  check_arg(tensor.dtype == DType::i32, argument,
            std::string("must hold int32 values (.npy '<i4', safetensors I32), not ") +
                dtype_name(tensor.dtype));
  std::vector<std::int32_t> values(static_cast<std::size_t>(tensor.numel()));
  std::copy_n(reinterpret_cast<const std::int32_t*>(tensor.bytes.data()), values.size(),
              values.begin());
  return values;
}

HostTensor reshaped(HostTensor tensor, std::vector<std::int64_t> shape,
                    const std::string& argument) {
  std::int64_t n = 1;
  for (std::int64_t extent : shape) n *= extent;
  check_arg(n == tensor.numel(), argument, "has the wrong number of elements for its role");
  tensor.shape = std::move(shape);
  return tensor;
}

void write_tensor_file(const std::string& path, const NamedTensors& tensors) {
  if (file_kind(path) == FileKind::safetensors) {
    write_safetensors(path, tensors);
    return;
  }
  check_arg(tensors.size() == 1, path,
            ".npy holds one tensor; use .safetensors to write " + names_of(tensors));
  write_npy(path, tensors.front().second);
}

}  // namespace turbodecode::cli
