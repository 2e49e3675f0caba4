// What the two norm-mix / HC-pre cluster kernels share (cluster_small_t.cu for small T,
// row_clusters.cu for many rows): which problems they take, a cluster's rows, and the
// arrival that lets blocks write into each other's shared memory.
#pragma once

#include <cstdint>

#include "hc/hc_args.h"

namespace turbodecode::cuda {

// Whether the cluster kernels take a norm-mix / HC-pre problem: n_hc = 4, E ≤ 5120 (rows of at
// most 80 chunks) and 16-byte loads of 8 x and W values everywhere.
inline constexpr int kClusterMaxEmbd = 5120;

inline bool fits_cluster_kernels(const hc::NormMixArgs& a) {
  const auto aligned16 = [](const void* ptr) {
    return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
  };
  return a.n_hc == 4 && a.embd % 8 == 0 && a.embd <= kClusterMaxEmbd && aligned16(a.x.data) &&
         a.x.row_stride % 4 == 0 && a.x.stream_stride % 4 == 0 && aligned16(a.weight) &&
         a.weight_stride % 8 == 0;
}

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
