// Host conversions between f32 and the 16-bit dtypes (DType::f16, DType::bf16), rounding to
// nearest even as the hardware converters do: for preparing F16 operands (an HC mix_weight, F16
// K/V) and reading F16 or BF16 files. Through the compiler's IEEE half type: F16C or Arm
// conversion instructions where the target has them.
#pragma once

#include <cstdint>
#include <cstring>

namespace turbodecode {

// GCC's C++ front end has no _Float16 on Arm before GCC 13; __fp16 is IEEE half there.
#if defined(__aarch64__)
using HostHalf = __fp16;
#else
using HostHalf = _Float16;
#endif

inline float f16_to_f32(std::uint16_t bits) {
  HostHalf h;
  std::memcpy(&h, &bits, sizeof h);
  return static_cast<float>(h);
}

// Round to nearest even, as the hardware converters do.
inline std::uint16_t f32_to_f16(float value) {
  HostHalf h = static_cast<HostHalf>(value);
  std::uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

inline float bf16_to_f32(std::uint16_t bits) {
  std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

inline std::uint16_t f32_to_bf16(float value) {
  std::uint32_t wide;
  std::memcpy(&wide, &value, sizeof wide);
  if ((wide & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((wide >> 16) | 0x40);
  wide += 0x7fffu + ((wide >> 16) & 1u);
  return static_cast<std::uint16_t>(wide >> 16);
}

}  // namespace turbodecode
