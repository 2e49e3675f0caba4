// Raw-pointer arguments of the Q8_0 matvec, shared by the CPU and CUDA backends.
#pragma once

#include <cstdint>

namespace turbodecode::q8 {

// out[t][r] = Σ_j W[r][j]·input[t][j], W in Q8_0 rows of `row_stride_bytes` bytes.
struct MatvecArgs {
  std::int64_t out_rows = 0;  // rows of W = width of each output row
  std::int64_t cols = 0;      // a multiple of 32
  std::int64_t tokens = 0;    // T
  const std::uint8_t* weight = nullptr;
  std::int64_t row_stride_bytes = 0;
  const float* input = nullptr;
  std::int64_t input_stride = 0;
  float* out = nullptr;
  std::int64_t out_stride = 0;
};

}  // namespace turbodecode::q8
