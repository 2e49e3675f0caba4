#include "common/validate.h"

#include <cstdint>
#include <string>

namespace turbodecode {

std::string shape_string(const TensorView& t) {
  std::string s = "[";
  for (int d = 0; d < t.rank; ++d) {
    if (d) s += ", ";
    s += std::to_string(t.shape[d]);
  }
  return s + "]";
}

bool product_at_most(std::span<const std::int64_t> factors, std::int64_t limit) {
  for (std::int64_t factor : factors) {
    if (factor < 0) return false;
    if (factor == 0) return limit >= 0;
  }
  std::int64_t product = 1;
  for (std::int64_t factor : factors) {
    if (factor > limit / product) return false;
    product *= factor;
  }
  return product <= limit;
}

void check_backend(Device device) {
#ifndef TURBODECODE_WITH_CUDA
  if (device == Device::cuda) {
    throw Error("a tensor lives on cuda, but turbodecode was built without the CUDA backend");
  }
#else
  (void)device;
#endif
}

// Far beyond any memory; a byte offset computed from a stride then never overflows.
constexpr std::int64_t kMaxStride = std::int64_t{1} << 48;

void check_tensor(const TensorView& t, std::string_view name, Device device, DType dtype,
                  std::initializer_list<std::int64_t> expect_shape) {
  check_arg(t.data != nullptr, name, "must not be null");
  check_arg(t.device == device, name,
            std::string("must live on ") + device_name(device) + ", not " + device_name(t.device));
  check_arg(t.dtype == dtype, name,
            std::string("must be ") + dtype_name(dtype) + ", not " + dtype_name(t.dtype));
  check_arg(t.rank == static_cast<int>(expect_shape.size()), name,
            "must have " + std::to_string(expect_shape.size()) + " dimensions, has " +
                std::to_string(t.rank));
  int d = 0;
  for (std::int64_t extent : expect_shape) {
    check_arg(t.shape[d] >= 0, name, "has a negative extent");
    if (extent != kAnyExtent) {
      check_arg(t.shape[d] == extent, name,
                "dimension " + std::to_string(d) + " must be " + std::to_string(extent) +
                    ", shape is " + shape_string(t));
    }
    check_arg(t.strides[d] >= 0 && t.strides[d] < kMaxStride, name, "strides must be in [0, 2^48)");
    ++d;
  }
  check_arg(reinterpret_cast<std::uintptr_t>(t.data) % dtype_bytes(dtype) == 0, name,
            "data pointer is misaligned for its dtype");
}

void check_rows(const TensorView& t, std::string_view name, Device device, DType dtype,
                std::initializer_list<std::int64_t> expect_shape) {
  check_tensor(t, name, device, dtype, expect_shape);
  check_arg(t.rank == 0 || t.shape[t.rank - 1] <= 1 || t.strides[t.rank - 1] == 1, name,
            "innermost dimension must be contiguous");
}

void check_disjoint(const TensorView& a, std::string_view a_name, const TensorView& b,
                    std::string_view b_name) {
  if (!a.present() || !b.present() || a.numel() == 0 || b.numel() == 0) return;
  auto begin_a = reinterpret_cast<std::uintptr_t>(a.data);
  auto begin_b = reinterpret_cast<std::uintptr_t>(b.data);
  auto end_a = begin_a + static_cast<std::uintptr_t>(a.span_bytes());
  auto end_b = begin_b + static_cast<std::uintptr_t>(b.span_bytes());
  check_arg(end_a <= begin_b || end_b <= begin_a, a_name,
            "must not overlap '" + std::string(b_name) + "'");
}

}  // namespace turbodecode
