// Tensor files: NumPy .npy and .safetensors, read into and written from host memory, so that
// tools and tests can exchange inputs and results with Python (numpy, torch, safetensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "turbodecode/tensor.h"

namespace turbodecode {

// A tensor in host memory laid out as in the file: C order, little-endian, any rank.
struct HostTensor {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;

  // A zero-filled tensor of `shape`; throws InvalidArgument("shape") for a negative extent or
  // more than 2^62 bytes.
  static HostTensor zeros(DType dtype, std::vector<std::int64_t> shape);
  // A tensor holding a copy of numel(shape) elements of `dtype` at `data`.
  static HostTensor copy_of(const void* data, DType dtype, std::vector<std::int64_t> shape);

  std::int64_t numel() const;
  // A contiguous view of the bytes; throws InvalidArgument when the rank exceeds kMaxRank.
  TensorView view() const;
};

// A file's tensors with their names, in file order.
using NamedTensors = std::vector<std::pair<std::string, HostTensor>>;

// .npy format versions 1, 2 and 3; dtypes '<f4', '<f2', '|u1', '<i4'; C order only. Errors
// (unreadable file, truncated data, bad header, unsupported dtype, Fortran order) throw
// InvalidArgument naming the file; a header's shape is checked against the bytes the file holds
// before anything is allocated for it. bf16 has no .npy dtype: write_npy rejects it.
HostTensor read_npy(const std::filesystem::path& path);
void write_npy(const std::filesystem::path& path, const HostTensor& tensor);

// .safetensors (8-byte header length, JSON header, packed data); dtypes F32, F16, BF16, U8, I32.
// Errors throw InvalidArgument naming the file (and the tensor where there is one).
NamedTensors read_safetensors(const std::filesystem::path& path);
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors);

}  // namespace turbodecode
