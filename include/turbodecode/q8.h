// Q8_0 weights (SPEC §1.4) and the matrix-vector product over them.
#pragma once

#include <cstdint>

#include "turbodecode/tensor.h"

namespace turbodecode {

// A Q8_0 block: f16 scale d, then 32 int8 q; weight = d·q.
inline constexpr int kQ8BlockValues = 32;
inline constexpr int kQ8BlockBytes = 34;

// Bytes of one Q8_0 row of `cols` weights (cols a multiple of 32).
constexpr std::int64_t q8_row_bytes(std::int64_t cols) {
  return cols / kQ8BlockValues * kQ8BlockBytes;
}

// Quantizes f32 rows [rows, cols] (cols a positive multiple of 32) to Q8_0 u8
// [rows, q8_row_bytes(cols)] on the CPU:
// d = max|x| / 127 (as f16), q = round(x / d).
void quantize_q8_0(const TensorView& src, const TensorView& dst);

// out[t][r] = Σ_j weight[r][j]·input[t][j]: weight u8 [rows, q8_row_bytes(cols)],
// input [T, cols] f32, out [T, rows] f32.
void q8_matvec(const TensorView& weight, const TensorView& input, const TensorView& out,
               Stream stream = {});

}  // namespace turbodecode
