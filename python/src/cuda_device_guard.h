// Makes a CUDA device current for one call and restores the previous one: the library launches
// on the current device, and torch tensors may live on another.
#pragma once

namespace turbodecode::python {

class CudaDeviceGuard {
 public:
  // index < 0 (CPU arrays) leaves the current device alone.
  explicit CudaDeviceGuard(int index);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace turbodecode::python
