#include "turbodecode/tensor.h"

#include "common/validate.h"

namespace turbodecode {

std::size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::u8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::u8:
      return "u8";
    case DType::i32:
      return "i32";
  }
  return "?";
}

const char* device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

TensorView TensorView::contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                                  Device device) {
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.device = device;
  check_arg(shape.size() <= static_cast<std::size_t>(kMaxRank), "shape",
            "at most 4 dimensions");
  view.rank = static_cast<int>(shape.size());
  int dim = 0;
  for (std::int64_t extent : shape) view.shape[dim++] = extent;
  std::int64_t stride = 1;
  for (int d = view.rank - 1; d >= 0; --d) {
    view.strides[d] = stride;
    stride *= view.shape[d];
  }
  return view;
}

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  std::int64_t expected = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::int64_t TensorView::span_bytes() const {
  if (numel() == 0) return 0;
  std::int64_t last = 0;
  for (int d = 0; d < rank; ++d) last += (shape[d] - 1) * strides[d];
  return (last + 1) * static_cast<std::int64_t>(dtype_bytes(dtype));
}

TensorView TensorView::slice(int dim, std::int64_t begin, std::int64_t count) const {
  check_arg(dim >= 0 && dim < rank, "dim", "must name a dimension of the view");
  check_arg(begin >= 0 && count >= 0 && begin + count <= shape[dim], "slice",
            "must lie inside the dimension");
  TensorView view = *this;
  view.data = static_cast<char*>(data) +
              begin * strides[dim] * static_cast<std::int64_t>(dtype_bytes(dtype));
  view.shape[dim] = count;
  return view;
}

}  // namespace turbodecode
