// R_D and its inverse (SPEC §1.1) on rows held in shared memory, for the kernels that rotate
// queries (TQ K) or un-rotate outputs (TQ V) inside their own launch.
#pragma once

#include "tq/codec_math.h"
#include "tq/cuda/codec_tables.cuh"

namespace turbodecode::cuda::decode {

__device__ __forceinline__ bool sign_flipped(int element) {
  return (tq_tables::kSignMask[element >> 3] >> (element & 7)) & 1;
}

// In-place unnormalised natural-order Walsh-Hadamard transform of `rows` rows of `head_dim`
// floats, by every thread of the block, strides 1, 2, 4, ... in the order codec_math.h fixes.
// Starts and ends with a block barrier, so callers may write before and read after it.
__device__ __forceinline__ void block_hadamard(float* data, int rows, int head_dim) {
  const int half = head_dim / 2;
  __syncthreads();
  for (int stride = 1; stride < head_dim; stride <<= 1) {
    for (int pair = static_cast<int>(threadIdx.x); pair < rows * half;
         pair += static_cast<int>(blockDim.x)) {
      const int row = pair / half;
      const int r = pair % half;
      const int low = row * head_dim + (r / stride) * 2 * stride + r % stride;
      tq::butterfly(data[low], data[low + stride]);
    }
    __syncthreads();
  }
}

}  // namespace turbodecode::cuda::decode
