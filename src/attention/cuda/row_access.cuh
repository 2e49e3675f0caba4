// Reading staged cache rows: turning the few elements of a staged row that one thread owns into
// f32 values (split_kernel.cuh stages the rows).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "attention/cuda/decode_params.cuh"
#include "tq/codec_math.h"

namespace turbodecode::cuda::decode {

// Decode scale of a TQ row part from its stored norm (SPEC §1.2). D = 512 multiplies by the
// block's precomputed 1/sf instead of dividing per row (at most one ulp from n / sf).
template <int D>
__device__ __forceinline__ float decode_scale(float norm, float inverse_scale_factor_d512) {
  if constexpr (D == 256) {
    return tq::d256_decode_scale(norm);
  } else {
    return norm * inverse_scale_factor_d512;
  }
}

// The kElements consecutive values from element `first` of a staged row. TQ codes become
// codebook(code) * scale (scale: the decode scale of the part holding `first`, or 1 where the
// caller applies it elsewhere; codebook: a lookup of codebook_lookup.cuh, unused for F16 rows).
template <RowCodec kCodec, int kElements, class Codebook>
__device__ __forceinline__ void row_elements(const unsigned char* row, int first,
                                             const Codebook& codebook, float scale,
                                             float (&x)[kElements]) {
  static_assert(kElements == 2 || kElements == 4, "a thread owns 2 or 4 elements");
  if constexpr (kCodec == RowCodec::f16) {
    // One 4- or 8-byte load of kElements halves.
    __half2 halves[kElements / 2];
    if constexpr (kElements == 4) {
      *reinterpret_cast<uint2*>(halves) = *reinterpret_cast<const uint2*>(row + 2 * first);
    } else {
      halves[0] = *reinterpret_cast<const __half2*>(row + 2 * first);
    }
#pragma unroll
    for (int i = 0; i < kElements / 2; ++i) {
      const float2 pair = __half22float2(halves[i]);
      x[2 * i] = pair.x;
      x[2 * i + 1] = pair.y;
    }
  } else {
    constexpr int kCodeBits = kCodec == RowCodec::tq_byte ? 8 : 4;
    constexpr unsigned kMask = (1u << kCodeBits) - 1u;
    const unsigned char* codes = row + first * kCodeBits / 8;
    unsigned word;
    if constexpr (kElements * kCodeBits == 32) {
      word = *reinterpret_cast<const unsigned*>(codes);
    } else if constexpr (kElements * kCodeBits == 16) {
      word = *reinterpret_cast<const unsigned short*>(codes);
    } else {
      word = *codes;
    }
#pragma unroll
    for (int i = 0; i < kElements; ++i) {
      // One-byte codes by a byte permute, which zero-extends: the lookup's address is then a
      // single shift-and-add (a shift and a mask first made it three instructions).
      const unsigned code =
          kCodeBits == 8 ? __byte_perm(word, 0u, 0x4440u | i) : (word >> (i * kCodeBits)) & kMask;
      x[i] = codebook(code) * scale;
    }
  }
}

}  // namespace turbodecode::cuda::decode
