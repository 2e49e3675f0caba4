#include "common/cuda/cuda_check.cuh"
#include "common/cuda_runtime.h"

namespace turbodecode::cuda {

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver/device" status
    return 0;
  }
  return count;
}

int sm_count() {
  int device = 0;
  TD_CUDA_CHECK(cudaGetDevice(&device));
  int count = 0;
  TD_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

void* malloc_bytes(std::int64_t bytes) {
  void* ptr = nullptr;
  TD_CUDA_CHECK(cudaMalloc(&ptr, static_cast<size_t>(bytes)));
  return ptr;
}

void free_bytes(void* ptr) noexcept { cudaFree(ptr); }

void copy_to_device(void* dst, const void* src, std::int64_t bytes) {
  TD_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice));
}

void copy_to_host(void* dst, const void* src, std::int64_t bytes) {
  TD_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost));
}

void fill_bytes(void* dst, std::uint8_t value, std::int64_t bytes) {
  TD_CUDA_CHECK(cudaMemset(dst, value, static_cast<size_t>(bytes)));
}

void synchronize(Stream stream) { TD_CUDA_CHECK(cudaStreamSynchronize(native(stream))); }

bool is_capturing(Stream stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TD_CUDA_CHECK(cudaStreamIsCapturing(native(stream), &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace turbodecode::cuda
