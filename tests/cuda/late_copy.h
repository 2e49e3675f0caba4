// A kernel for testing how the library's dependent launches wait (dependent_launch.cuh): one
// block that lets the next kernel in the stream start at once, then copies `bytes` from `from`
// to `to` only after about `microseconds`. A kernel launched after it that reads `to` before
// waiting for the kernels before it sees the old bytes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace turbodecode::testing {

void launch_late_copy(void* to, const void* from, std::int64_t bytes, int microseconds,
                      cudaStream_t stream);

}  // namespace turbodecode::testing
