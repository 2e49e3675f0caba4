// Programmatic dependent launch (Hopper): a kernel launched with launch_dependent may start while
// the kernel before it in the stream is still running. It must call wait_for_prior_grids()
// before it reads anything an earlier kernel writes or writes anything an earlier kernel may
// still use; what it reads before that (weights no kernel writes) streams in while the earlier
// kernel finishes. A kernel calls allow_dependent_grids() to let the next one start early: the
// next kernel's blocks then take SMs as they come free, and still wait for this grid to
// complete before touching its results. Both instructions do nothing where the launch was
// ordinary.
#pragma once

#include <cuda_runtime.h>

#include "common/cuda/cuda_check.cuh"

namespace turbodecode::cuda {

__device__ __forceinline__ void wait_for_prior_grids() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__device__ __forceinline__ void allow_dependent_grids() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...), allowed to overlap the kernel before it.
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, int shared_bytes,
                      cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = static_cast<std::size_t>(shared_bytes);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  TD_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace turbodecode::cuda
