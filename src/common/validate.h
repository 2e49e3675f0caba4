// Argument checks shared by every operator's validation function (SPEC §7).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "turbodecode/error.h"
#include "turbodecode/tensor.h"

namespace turbodecode {

inline void check_arg(bool ok, std::string_view argument, std::string_view rule) {
  if (!ok) throw InvalidArgument(std::string(argument), std::string(rule));
}

// Extent that matches any size in expect_shape.
inline constexpr std::int64_t kAnyExtent = -1;

// True when the product of `factors` (each >= 0) is at most `limit`, computed without
// overflow: sizes from files and callers are checked with it before they size anything.
bool product_at_most(std::span<const std::int64_t> factors, std::int64_t limit);
inline bool product_at_most(std::initializer_list<std::int64_t> factors, std::int64_t limit) {
  return product_at_most(std::span<const std::int64_t>(factors.begin(), factors.size()), limit);
}

// Throws when `device` is CUDA and the CUDA backend was not compiled in.
void check_backend(Device device);

// Checks presence, device, dtype, rank and shape of a tensor argument, that its strides are
// non-negative and below 2^48, and that its data pointer is aligned to its element size.
void check_tensor(const TensorView& t, std::string_view name, Device device, DType dtype,
                  std::initializer_list<std::int64_t> expect_shape);
// Additionally requires the innermost dimension to be contiguous (stride 1).
void check_rows(const TensorView& t, std::string_view name, Device device, DType dtype,
                std::initializer_list<std::int64_t> expect_shape);
// Rejects two views whose byte ranges overlap (an output that aliases an input).
void check_disjoint(const TensorView& a, std::string_view a_name, const TensorView& b,
                    std::string_view b_name);
std::string shape_string(const TensorView& t);

}  // namespace turbodecode
