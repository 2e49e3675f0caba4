#include <cstring>

#include "common/validate.h"
#include "io/file_bytes.h"
#include "turbodecode/io.h"

namespace turbodecode {

HostTensor HostTensor::zeros(DType dtype, std::vector<std::int64_t> shape) {
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  const std::optional<std::int64_t> bytes = io::tensor_bytes(dtype, tensor.shape);
  check_arg(bytes.has_value(), "shape", "extents must be >= 0 and the tensor at most 2^62 bytes");
  tensor.bytes.resize(static_cast<std::size_t>(*bytes));
  return tensor;
}

HostTensor HostTensor::copy_of(const void* data, DType dtype, std::vector<std::int64_t> shape) {
  HostTensor tensor = zeros(dtype, std::move(shape));
  if (!tensor.bytes.empty()) std::memcpy(tensor.bytes.data(), data, tensor.bytes.size());
  return tensor;
}

std::int64_t HostTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t extent : shape) n *= extent;
  return n;
}

TensorView HostTensor::view() const {
  check_arg(shape.size() <= static_cast<std::size_t>(kMaxRank), "shape",
            "at most 4 dimensions fit a TensorView");
  TensorView view;
  // Views are the library's non-owning currency; callers decide whether to write through it.
  view.data = const_cast<std::byte*>(bytes.data());
  view.dtype = dtype;
  view.rank = static_cast<int>(shape.size());
  std::int64_t stride = 1;
  for (int d = view.rank - 1; d >= 0; --d) {
    view.shape[d] = shape[d];
    view.strides[d] = stride;
    stride *= shape[d];
  }
  return view;
}

}  // namespace turbodecode
