// Owning device or host memory, for callers that want the library to allocate.
#pragma once

#include <cstdint>

#include "turbodecode/tensor.h"

namespace turbodecode {

// A byte buffer on one device (host memory for Device::cpu, cudaMalloc for Device::cuda),
// 256-byte aligned. Move-only.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device device, std::int64_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  std::int64_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  // A contiguous view of the buffer from byte `offset`.
  TensorView view(DType dtype, std::initializer_list<std::int64_t> shape,
                  std::int64_t offset = 0) const;

  void copy_from_host(const void* src, std::int64_t bytes, std::int64_t offset = 0);
  void copy_to_host(void* dst, std::int64_t bytes, std::int64_t offset = 0) const;
  // Sets every byte to `value` (tests poison outputs with 0xFF, which reads as NaN in f32).
  void fill_bytes(std::uint8_t value);

 private:
  void release() noexcept;

  void* data_ = nullptr;
  std::int64_t bytes_ = 0;
  Device device_ = Device::cpu;
};

// True when the CUDA backend was compiled in and a device is visible.
bool cuda_available();
// Number of streaming multiprocessors of the current CUDA device (0 without one).
int cuda_sm_count();
// Blocks until all work on `stream` is done (no-op on CPU).
void synchronize(Stream stream = {});

}  // namespace turbodecode
