// What the two norm-mix / HC-pre cluster kernels share (cluster_small_t.cu for small T,
// row_clusters.cu for many rows): a cluster's rows, and the arrival that lets blocks write into
// each other's shared memory. Which problems they take: hc/pre_kernel.h.
#pragma once

#include <cstdint>

#include "hc/hc_args.h"
#include "hc/pre_kernel.h"

namespace turbodecode::cuda {

using hc::kClusterMaxEmbd;

// The rows of a cluster's group (blockIdx.y): first .. first + count − 1 of the launch.
struct RowGroup {
  std::int64_t first;
  int count;
};

__device__ __forceinline__ RowGroup cluster_row_group(std::int64_t rows, int group_rows) {
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * group_rows;
  const std::int64_t left = rows - first;
  return {first, static_cast<int>(left < group_rows ? left : group_rows)};
}

// Arrives, without ordering any memory access, at the cluster barrier that the block later waits
// for before its first write into another block's shared memory: no block writes into one that
// has not started (compute-sanitizer's racecheck flags such writes).
__device__ __forceinline__ void arrive_started() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}

}  // namespace turbodecode::cuda
