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
// floats, by the block's first kThreads threads, strides 1, 2, 4, ... in the order
// codec_math.h fixes. `barrier()` synchronises those threads; the transform starts and ends
// with it, so callers may write before and read after it.
template <int kThreads, class Barrier>
__device__ __forceinline__ void hadamard_rows(float* data, int rows, int head_dim,
                                              Barrier barrier) {
  const int half = head_dim / 2;
  barrier();
  for (int stride = 1; stride < head_dim; stride <<= 1) {
    for (int pair = static_cast<int>(threadIdx.x); pair < rows * half; pair += kThreads) {
      const int row = pair / half;
      const int r = pair % half;
      const int low = row * head_dim + (r / stride) * 2 * stride + r % stride;
      tq::butterfly(data[low], data[low + stride]);
    }
    barrier();
  }
}

}  // namespace turbodecode::cuda::decode
