// Q8_0 weights as exact f32 values without I2F, shared by the CUDA-core and tensor-core matvecs.
#pragma once

#include <cstdint>

namespace turbodecode::cuda {

// Weights are widened with integer and add instructions instead of I2F, which runs at a
// quarter of the FP32 rate and would cap the matvec below DRAM speed: flipping the sign bit of
// byte q gives q + 128, placed in the mantissa of 2^23 (0x4B000000) that is exactly
// 2^23 + 128 + q, and subtracting 2^23 + 128 leaves exactly float(q).
inline constexpr std::uint32_t kQ8SignBits = 0x80808080u;
inline constexpr float kQ8BiasedZero = 8388736.0f;  // 2^23 + 128

// Weight `byte` (0..3) of a word of weights XORed with kQ8SignBits.
__device__ __forceinline__ float q8_weight(std::uint32_t biased_word, int byte) {
  return __uint_as_float(__byte_perm(biased_word, 0x4B000000u, 0x7540u + byte)) - kQ8BiasedZero;
}

}  // namespace turbodecode::cuda
