#include "cuda/late_copy.h"

#include "common/cuda/dependent_launch.cuh"

namespace turbodecode::testing {
namespace {

__device__ std::uint64_t global_time_ns() {
  std::uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

__global__ void late_copy_kernel(unsigned char* to, const unsigned char* from, std::int64_t bytes,
                                 std::uint64_t nanoseconds) {
  cuda::allow_dependent_grids();
  cuda::wait_for_prior_grids();
  if (threadIdx.x == 0) {
    const std::uint64_t start = global_time_ns();
    while (global_time_ns() - start < nanoseconds) {
    }
  }
  __syncthreads();
  for (std::int64_t i = threadIdx.x; i < bytes; i += blockDim.x) to[i] = from[i];
}

}  // namespace

void launch_late_copy(void* to, const void* from, std::int64_t bytes, int microseconds,
                      cudaStream_t stream) {
  cuda::launch_dependent(late_copy_kernel, 1, 256, 0, stream, static_cast<unsigned char*>(to),
                         static_cast<const unsigned char*>(from), bytes,
                         static_cast<std::uint64_t>(microseconds) * 1000);
}

}  // namespace turbodecode::testing
