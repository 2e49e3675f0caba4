// FP8 E4M3 rows (SPEC §1.6): the OCP format of torch.float8_e4m3fn (bias 7, 3 mantissa bits,
// largest finite 448, no infinities, S.1111.111 NaN) with one f32 scale per row. Element-level
// arithmetic shared by the CPU backend and the CUDA kernels, so both round identically.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace turbodecode::fp8 {

inline constexpr float kMaxFinite = 448.0f;
inline constexpr unsigned char kNaN = 0x7f;

TD_HOST_DEVICE std::uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

// The row scale from the row's largest magnitude: amax / 448 (0 for a zero row).
TD_HOST_DEVICE float row_scale(float amax) {
  return amax / kMaxFinite;
}

// E4M3 code of x / scale: round to nearest even, saturated to ±448. A NaN x (or scale) gives
// the NaN code; otherwise a zero scale (a zero row) gives 0. NaN is tested first: a row whose
// only nonzero element is NaN has scale 0 (fmaxf ignores NaN) and must keep that NaN.
TD_HOST_DEVICE unsigned char encode(float x, float scale) {
  if (x != x || scale != scale) return kNaN;
  if (scale == 0.0f) return 0;
  const float q = x / scale;
  if (q != q) return kNaN;  // ±∞ / ±∞
  const unsigned char sign = (float_bits(q) >> 31) ? 0x80 : 0x00;
  const float a = fabsf(q);
  if (a >= kMaxFinite) return sign | 0x7e;
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (8 rounds up to the first normal)
    return sign | static_cast<unsigned char>(rintf(a * 512.0f));
  }
  // Round the f32 mantissa to 3 bits, nearest even; a carry moves into the exponent.
  std::uint32_t bits = float_bits(a);
  bits += 0x7ffffu + ((bits >> 20) & 1u);
  const int exponent = static_cast<int>(bits >> 23) - 127;  // -6 … 8
  const unsigned mantissa = (bits >> 20) & 7u;
  // a < 448 rounds at most to 448 (code 0x7E), never into the NaN code.
  return sign | static_cast<unsigned char>((static_cast<unsigned>(exponent + 7) << 3) | mantissa);
}

// The E4M3 value of a code (without the row scale): exact in f32, and in f16.
TD_HOST_DEVICE float decode(unsigned char code) {
  const int exponent = (code >> 3) & 15;
  const int mantissa = code & 7;
  float magnitude;
  if (exponent == 15 && mantissa == 7) {
    magnitude = NAN;
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * 0.001953125f;  // 2^-9
  } else {
    magnitude = ldexpf(1.0f + static_cast<float>(mantissa) * 0.125f, exponent - 7);
  }
  return (code & 0x80) ? -magnitude : magnitude;
}

}  // namespace turbodecode::fp8
