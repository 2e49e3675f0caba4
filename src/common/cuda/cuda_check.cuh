// Turns CUDA runtime failures into CudaError exceptions naming the failing call.
#pragma once

#include <cuda_runtime.h>

#include "turbodecode/error.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

inline void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw CudaError(call, static_cast<int>(status), cudaGetErrorString(status));
}

inline cudaStream_t native(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

}  // namespace turbodecode::cuda

#define TD_CUDA_CHECK(call) ::turbodecode::cuda::check((call), #call)
// After a <<<...>>> launch: reports configuration errors at the launch site.
#define TD_CUDA_CHECK_LAUNCH(kernel_name) \
  ::turbodecode::cuda::check(cudaGetLastError(), "launch of " kernel_name)
