// Opting a kernel into more than 48 KB of dynamic shared memory, once per device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include "common/cuda/cuda_check.cuh"

namespace turbodecode::cuda {

// One per kernel (a function-local static next to the launch): ensure() sets the kernel's
// dynamic shared-memory limit on the current device the first time it runs there.
class SharedMemoryOptIn {
 public:
  void ensure(const void* kernel, int bytes) {
    int device = 0;
    TD_CUDA_CHECK(cudaGetDevice(&device));
    const std::lock_guard<std::mutex> lock(mutex_);
    const std::uint64_t bit = std::uint64_t{1} << (device & 63);
    if ((devices_ & bit) == 0) {
      TD_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
      devices_ |= bit;
    }
  }

 private:
  std::mutex mutex_;
  std::uint64_t devices_ = 0;  // bit d: done on device d (mod 64)
};

}  // namespace turbodecode::cuda
