// Host rows for the codec tests (CPU backend): inputs in any dtype and row stride with the values
// the library sees after widening, poisoned outputs, and the checks that padding stays untouched.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/f16.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/tensor.h"

namespace turbodecode::testing {

// N(0,1) rows, optionally with a few channels 30× larger in every row (outlier channels).
inline std::vector<float> test_rows(std::int64_t rows, int head_dim, bool outliers,
                                    std::uint64_t seed) {
  std::vector<float> x = gaussian(static_cast<std::size_t>(rows * head_dim), seed);
  if (!outliers) return x;
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<int> channel(0, head_dim - 1);
  for (int k = 0; k < 6; ++k) {
    const int c = channel(rng);
    for (std::int64_t r = 0; r < rows; ++r)
      x[r * head_dim + c] = 30.0f + 10.0f * x[r * head_dim + c];
  }
  return x;
}

// Rows of `head_dim` values stored in `dtype` with a row stride of `row_stride` elements,
// plus the values the library sees after widening (what the oracle must be given).
struct InputRows {
  Buffer storage;
  TensorView view;
  std::vector<double> widened;  // rows × head_dim, row-major
};

inline InputRows make_input(const std::vector<float>& values, std::int64_t rows, int head_dim,
                            DType dtype, std::int64_t row_stride) {
  InputRows in;
  const std::int64_t element_bytes = static_cast<std::int64_t>(dtype_bytes(dtype));
  in.storage = Buffer(Device::cpu, std::max<std::int64_t>(1, rows * row_stride * element_bytes));
  in.storage.fill_bytes(0xFF);
  in.view = TensorView::contiguous(in.storage.data(), dtype, {rows, head_dim});
  in.view.strides[0] = row_stride;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < head_dim; ++j) {
      const float v = values[r * head_dim + j];
      const std::int64_t at = r * row_stride + j;
      if (dtype == DType::f32) {
        in.view.as<float>()[at] = v;
        in.widened.push_back(v);
      } else {
        const std::uint16_t bits = dtype == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
        in.view.as<std::uint16_t>()[at] = bits;
        in.widened.push_back(dtype == DType::f16 ? f16_to_f32(bits) : bf16_to_f32(bits));
      }
    }
  }
  return in;
}

// A poisoned output of `rows` rows of `width` elements with a row stride of `row_stride`.
struct OutputRows {
  Buffer storage;
  TensorView view;
};

inline OutputRows make_output(DType dtype, std::int64_t rows, std::int64_t width,
                              std::int64_t row_stride) {
  OutputRows out;
  out.storage = Buffer(
      Device::cpu, std::max<std::int64_t>(1, rows * row_stride * std::int64_t(dtype_bytes(dtype))));
  out.storage.fill_bytes(0xFF);
  out.view = TensorView::contiguous(out.storage.data(), dtype, {rows, width});
  out.view.strides[0] = row_stride;
  return out;
}

// Bytes of the output buffer outside the view's rows (row padding) keep their poison.
inline void expect_padding_untouched(const OutputRows& out) {
  const auto* bytes = static_cast<const std::uint8_t*>(out.storage.data());
  const std::int64_t element = static_cast<std::int64_t>(dtype_bytes(out.view.dtype));
  for (std::int64_t r = 0; r < out.view.shape[0]; ++r) {
    for (std::int64_t e = out.view.shape[1]; e < out.view.strides[0]; ++e) {
      for (std::int64_t b = 0; b < element; ++b) {
        ASSERT_EQ(bytes[(r * out.view.strides[0] + e) * element + b], 0xFF) << "row " << r;
      }
    }
  }
}

inline std::vector<double> row_of(const std::vector<double>& all, std::int64_t r, int head_dim) {
  return {all.begin() + r * head_dim, all.begin() + (r + 1) * head_dim};
}

}  // namespace turbodecode::testing
