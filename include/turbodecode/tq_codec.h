// TurboQuant-HB row codec (SPEC §1.1-1.2): random signs + Walsh-Hadamard rotation R_D,
// per-row norms, one Lloyd-Max codebook index per element.
#pragma once

#include <cstdint>
#include <string_view>

#include "turbodecode/tensor.h"

namespace turbodecode {

// How one cache row is stored: plain F16, or TurboQuant-HB codes of 4, 5, 6 or 8 bits.
enum class RowFormat : std::uint8_t { f16, tq4, tq5, tq6, tq8 };

bool is_quantized(RowFormat format);
int format_bits(RowFormat format);  // 16 for f16
const char* format_name(RowFormat format);  // "f16", "tq4", ...
RowFormat parse_format(std::string_view name);  // throws InvalidArgument("format", ...)

// Bytes of one stored row of `head_dim` elements: 2·D for f16, D/2 for tq4, D otherwise.
std::int64_t row_bytes(RowFormat format, int head_dim);
// f32 norms stored per TQ row: 1 for D = 256, 2 for D = 512 (one per half).
int norms_per_row(int head_dim);

struct CodecParams {
  int head_dim = 256;            // 256 or 512
  RowFormat format = RowFormat::tq8;  // a quantized format
  float scale_factor_d512 = 1.0f;     // `sf` of SPEC §1.2, D = 512 only
};

// x [rows, D] f32/f16/bf16 -> codes [rows, row_bytes] u8 and norms [rows, norms_per_row] f32.
void encode_rows(const CodecParams& params, const TensorView& x, const TensorView& codes,
                 const TensorView& norms, Stream stream = {});

// codes + norms -> y [rows, D] f32, the decoded row in the ROTATED basis (ŷ ≈ R_D x).
void decode_rows(const CodecParams& params, const TensorView& codes, const TensorView& norms,
                 const TensorView& y, Stream stream = {});

// y = R_D(x) and x = R_D⁻¹(y), rows of D f32 values. In-place (same view) is allowed.
void rotate_rows(int head_dim, const TensorView& x, const TensorView& y, Stream stream = {});
void unrotate_rows(int head_dim, const TensorView& y, const TensorView& x, Stream stream = {});

}  // namespace turbodecode
