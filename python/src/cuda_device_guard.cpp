#include "cuda_device_guard.h"

#ifdef TURBODECODE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "turbodecode/error.h"
#endif

namespace turbodecode::python {

#ifdef TURBODECODE_WITH_CUDA
CudaDeviceGuard::CudaDeviceGuard(int index) {
  if (index < 0) return;
  int current = 0;
  cudaError_t status = cudaGetDevice(&current);
  if (status == cudaSuccess && current != index) {
    status = cudaSetDevice(index);
    if (status == cudaSuccess) previous_ = current;
  }
  if (status != cudaSuccess) {
    throw CudaError("cudaSetDevice", static_cast<int>(status), cudaGetErrorString(status));
  }
}

CudaDeviceGuard::~CudaDeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}
#else
// Without the CUDA backend a CUDA array is rejected by the library's own checks.
CudaDeviceGuard::CudaDeviceGuard(int) {}
CudaDeviceGuard::~CudaDeviceGuard() = default;
#endif

}  // namespace turbodecode::python
