// Launching kernels on thread-block clusters (Hopper): the launch configuration, as a dependent
// launch (dependent_launch.cuh), the per-device opt-in a cluster kernel needs, and how many
// clusters of a kernel the device runs at once.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "common/cuda/cuda_check.cuh"

namespace turbodecode::cuda {

// A grid of one cluster of cluster_blocks blocks (along x) per group of group_rows of rows (along
// y), allowed to overlap the kernel before it.
inline cudaLaunchConfig_t cluster_launch_config(std::int64_t rows, int group_rows,
                                                int cluster_blocks, int threads,
                                                std::size_t shared_bytes, cudaStream_t stream,
                                                cudaLaunchAttribute (&attributes)[2]) {
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = static_cast<unsigned>(cluster_blocks);
  attributes[0].val.clusterDim.y = 1;
  attributes[0].val.clusterDim.z = 1;
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(cluster_blocks),
                        static_cast<unsigned>((rows + group_rows - 1) / group_rows));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = 2;
  return config;
}

// Allows kKernel a non-portable cluster size and `shared_bytes` of dynamic shared memory on the
// current device. Asked once per device; returns the device's answer every time.
template <auto kKernel>
cudaError_t allow_cluster_kernel(std::size_t shared_bytes) {
  static std::mutex mutex;
  static std::uint64_t asked = 0;  // bit d: device d (mod 64) was asked
  static cudaError_t answers[64] = {};
  int device = 0;
  TD_CUDA_CHECK(cudaGetDevice(&device));
  const std::uint64_t bit = std::uint64_t{1} << (device & 63);
  const std::lock_guard<std::mutex> lock(mutex);
  if ((asked & bit) == 0) {
    asked |= bit;
    cudaError_t answer =
        cudaFuncSetAttribute(kKernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (answer == cudaSuccess) {
      answer = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(shared_bytes));
    }
    answers[device & 63] = answer;
    (void)cudaGetLastError();  // a refusal is an answer, not an error of a later launch
  }
  return answers[device & 63];
}

// How many clusters of kKernel, launched as config, the current device runs at once (0: none
// can run). Asks the occupancy calculator each time: plans call it, launches do not.
template <auto kKernel>
int resident_clusters(const cudaLaunchConfig_t& config) {
  if (allow_cluster_kernel<kKernel>(config.dynamicSmemBytes) != cudaSuccess) return 0;
  int count = 0;
  if (cudaOccupancyMaxActiveClusters(&count, kKernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace turbodecode::cuda
