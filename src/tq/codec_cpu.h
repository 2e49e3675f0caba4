// CPU backend of the row codec (TurboQuant-HB and FP8 rows): whole-row operations (also used by
// the KV cache's append) and the batched entry points behind the public calls. Arguments arrive
// validated.
#pragma once

#include <cstdint>

#include "turbodecode/tensor.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::tq {

// Widens `count` elements of dtype f32, f16 or bf16 to f32.
void load_row(const void* source, DType dtype, int count, float* destination);
// row ← R_D(row), and row ← R_D⁻¹(row), in place over head_dim elements.
void rotate_row(int head_dim, float* row);
void unrotate_row(int head_dim, float* row);
// One row of head_dim elements of `dtype` → row_bytes codes and row_scales side values (TQ
// norms or the FP8 scale).
void encode_row(const CodecParams& params, const void* x, DType dtype, std::uint8_t* codes,
                float* norms);
// Codes and side values of one row → its decoded values (TQ: rotated, ŷ; FP8: x̂).
void decode_row(const CodecParams& params, const std::uint8_t* codes, const float* norms, float* y);

void encode_rows_cpu(const CodecParams& params, const TensorView& x, const TensorView& codes,
                     const TensorView& norms);
void decode_rows_cpu(const CodecParams& params, const TensorView& codes, const TensorView& norms,
                     const TensorView& y);
void rotate_rows_cpu(int head_dim, bool inverse, const TensorView& in, const TensorView& out);

}  // namespace turbodecode::tq
