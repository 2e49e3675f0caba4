// The CUDA events and copies the in-process communicator orders its ranks' streams with.
#include <utility>

#include "common/cuda/cuda_check.cuh"
#include "shard/cuda/shard_cuda.h"

namespace turbodecode::cuda {
namespace {

cudaEvent_t event_of(void* handle) {
  return static_cast<cudaEvent_t>(handle);
}

}  // namespace

Event::Event() {
  cudaEvent_t event = nullptr;
  TD_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  handle_ = event;
}

Event::~Event() {
  if (handle_ != nullptr) cudaEventDestroy(event_of(handle_));
}

Event::Event(Event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  std::swap(handle_, other.handle_);
  return *this;
}

void Event::record(Stream stream) {
  TD_CUDA_CHECK(cudaEventRecord(event_of(handle_), native(stream)));
}

void Event::order_before(Stream stream) const {
  TD_CUDA_CHECK(cudaStreamWaitEvent(native(stream), event_of(handle_), 0));
}

void copy_device_async(void* dst, const void* src, std::int64_t bytes, Stream stream) {
  TD_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, native(stream)));
}

}  // namespace turbodecode::cuda
