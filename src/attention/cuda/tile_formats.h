// How the decode kernel treats each row format: the math of its K tiles (scores) and V tiles
// (the weighted sum), and the sizes it stages. Host-safe and constexpr (decode_shape.h).
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::cuda::decode {

// Scores q·k on tensor cores for every K format (scores.cuh):
//   f16  F16 rows as they are: m16n8k16 f16 with q split into f16 high and low parts.
//   fp8  E4M3 rows widened to f16 on chip (exact), the same f16 tiles; the row scale multiplies
//        the score.
//   tq   codes looked up as bf16 high/low pairs of the codebook value, q (rotated) split the
//        same way, three bf16 products; the row's decode scale multiplies the score.
enum class KTile : int { f16, fp8, tq };

// The weighted sum of V rows (values.cuh):
//   f16  CUDA-core FMAs on the F16 values (exact operands).
//   fp8  tensor cores: E4M3 widened to bf16 (exact), weights (with the row scale folded in)
//        split into bf16 high and low parts, two products.
//   tq   tensor cores: codes looked up as bf16 high/low pairs, weights split likewise (decode
//        scale folded in), three products.
enum class VTile : int { f16, fp8, tq };

TD_HOST_DEVICE_CONSTEXPR KTile k_tile_of(RowFormat format) {
  return format == RowFormat::f16 ? KTile::f16 : (format == RowFormat::fp8 ? KTile::fp8 : KTile::tq);
}

TD_HOST_DEVICE_CONSTEXPR VTile v_tile_of(RowFormat format) {
  return format == RowFormat::f16 ? VTile::f16 : (format == RowFormat::fp8 ? VTile::fp8 : VTile::tq);
}

// Bits of one stored code (16 for F16 values).
TD_HOST_DEVICE_CONSTEXPR int code_bits(RowFormat format) {
  switch (format) {
    case RowFormat::f16:
      return 16;
    case RowFormat::fp8:
    case RowFormat::tq8:
      return 8;
    case RowFormat::tq3:
      return 3;
    case RowFormat::tq4:
      return 4;
    case RowFormat::tq5:
      return 5;
    case RowFormat::tq6:
      return 6;
  }
  return 0;
}

// Bytes of a stored row of `head_dim` values (row_bytes of tq_codec.h, at compile time).
TD_HOST_DEVICE_CONSTEXPR std::int64_t stored_row_bytes(RowFormat format, int head_dim) {
  return static_cast<std::int64_t>(code_bits(format)) * head_dim / 8;
}

// f32 side values of a stored row (row_scales of tq_codec.h, at compile time).
TD_HOST_DEVICE_CONSTEXPR int side_values(RowFormat format, int head_dim) {
  if (format == RowFormat::f16) return 0;
  if (format == RowFormat::fp8) return 1;
  return head_dim == 512 ? 2 : 1;
}

}  // namespace turbodecode::cuda::decode
