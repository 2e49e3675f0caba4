// Row formats of the KV cache (SPEC §1.2, §1.5, §1.6) and the row codec: FP8 E4M3 rows with a
// per-row scale, and TurboQuant-HB codes (random signs + Walsh-Hadamard rotation R_D, per-row
// norms, Lloyd-Max codebook indices, bit-packed).
#pragma once

#include <cstdint>
#include <string_view>

#include "turbodecode/tensor.h"

namespace turbodecode {

// How one cache row is stored:
//   f16          D half floats.
//   fp8          D E4M3 bytes (torch.float8_e4m3fn) + one f32 scale (SPEC §1.6). Not rotated.
//   tq3 … tq8    TurboQuant-HB codes of 3, 4, 5, 6 or 8 bits + f32 norms (SPEC §1.2): tq4
//                nibble-packed, tq3/tq5/tq6 bit-packed in little-endian groups (SPEC §1.5),
//                tq8 one byte per code. Decoded rows live in the rotated basis.
enum class RowFormat : std::uint8_t { f16, fp8, tq3, tq4, tq5, tq6, tq8 };

// Every format, in the order above (tables, CLI lists, tests).
inline constexpr RowFormat kRowFormats[] = {RowFormat::f16, RowFormat::fp8, RowFormat::tq3,
                                            RowFormat::tq4, RowFormat::tq5, RowFormat::tq6,
                                            RowFormat::tq8};

// Not F16: the row has f32 side values (FP8 scale or TQ norms) beside its bytes.
bool is_quantized(RowFormat format);
// A TurboQuant-HB format (tq3 … tq8): rotated codes and norms.
bool is_turboquant(RowFormat format);
int format_bits(RowFormat format);              // 16 for f16, 8 for fp8, b for tqb
const char* format_name(RowFormat format);      // "f16", "fp8", "tq3", ...
RowFormat parse_format(std::string_view name);  // throws InvalidArgument("format", ...)

// Bytes of one stored row of `head_dim` elements: 2·D (f16), D (fp8, tq8), b·D/8 (tqb).
std::int64_t row_bytes(RowFormat format, int head_dim);
// f32 norms of one TQ row: 1 for D = 256, 2 for D = 512 (one per half).
int norms_per_row(int head_dim);
// f32 side values stored per row: 0 (f16), 1 (fp8: the scale), norms_per_row(D) (TQ).
int row_scales(RowFormat format, int head_dim);

struct CodecParams {
  int head_dim = 256;                 // 256 or 512
  RowFormat format = RowFormat::tq8;  // a quantized format
  float scale_factor_d512 = 1.0f;     // `sf` of SPEC §1.2, D = 512 TQ only
};

// x [rows, D] f32/f16/bf16 -> codes [rows, row_bytes] u8 and scales [rows, row_scales] f32
// (TQ norms, or the FP8 scale).
void encode_rows(const CodecParams& params, const TensorView& x, const TensorView& codes,
                 const TensorView& norms, Stream stream = {});

// codes + scales -> y [rows, D] f32: for TQ the decoded row in the ROTATED basis (ŷ ≈ R_D x),
// for FP8 the row itself (x̂ ≈ x).
void decode_rows(const CodecParams& params, const TensorView& codes, const TensorView& norms,
                 const TensorView& y, Stream stream = {});

// y = R_D(x) and x = R_D⁻¹(y), rows of D f32 values. In-place (same view) is allowed.
void rotate_rows(int head_dim, const TensorView& x, const TensorView& y, Stream stream = {});
void unrotate_rows(int head_dim, const TensorView& y, const TensorView& x, Stream stream = {});

}  // namespace turbodecode
