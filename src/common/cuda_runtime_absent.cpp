// Stand-ins for the CUDA runtime services when the CUDA backend is not compiled in.
#include "common/cuda_runtime.h"
#include "turbodecode/error.h"

namespace turbodecode::cuda {
namespace {
[[noreturn]] void unavailable() {
  throw Error("turbodecode was built without the CUDA backend (nvcc was not found)");
}
}  // namespace

int device_count() { return 0; }
int sm_count() { return 0; }
void* malloc_bytes(std::int64_t) { unavailable(); }
void free_bytes(void*) noexcept {}
void copy_to_device(void*, const void*, std::int64_t) { unavailable(); }
void copy_to_host(void*, const void*, std::int64_t) { unavailable(); }
void fill_bytes(void*, std::uint8_t, std::int64_t) { unavailable(); }
void synchronize(Stream) {}
bool is_capturing(Stream) { return false; }

}  // namespace turbodecode::cuda
