// The few CUDA runtime services host code needs, behind plain C++ declarations so that .cpp
// files never include CUDA headers. Defined in cuda_runtime.cu; without the CUDA backend every
// call throws, and cuda_device_count() returns 0.
#pragma once

#include <cstdint>

#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

int device_count();
int sm_count();
void* malloc_bytes(std::int64_t bytes);
void free_bytes(void* ptr) noexcept;
void copy_to_device(void* dst, const void* src, std::int64_t bytes);
void copy_to_host(void* dst, const void* src, std::int64_t bytes);
void fill_bytes(void* dst, std::uint8_t value, std::int64_t bytes);
void synchronize(Stream stream);
// True while `stream` is being captured into a CUDA graph.
bool is_capturing(Stream stream);

}  // namespace turbodecode::cuda
