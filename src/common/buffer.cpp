#include "turbodecode/buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "common/cuda_runtime.h"
#include "common/validate.h"

namespace turbodecode {
namespace {
constexpr std::size_t kAlignment = 256;
// Large host buffers (KV caches) are 2 MiB aligned and asked to use transparent huge pages:
// streaming a cache with 4 KiB pages spends a measurable share of the CPU backend's time on
// TLB misses.
constexpr std::size_t kHugePage = std::size_t{2} << 20;

void* allocate_host(std::size_t bytes) {
  const std::size_t alignment = bytes >= kHugePage ? kHugePage : kAlignment;
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* data = std::aligned_alloc(alignment, rounded);
  if (!data) throw std::bad_alloc();
  if (alignment == kHugePage) madvise(data, rounded, MADV_HUGEPAGE);  // a hint; failure is fine
  return data;
}
}  // namespace

Buffer::Buffer(Device device, std::int64_t bytes) : bytes_(bytes), device_(device) {
  check_arg(bytes >= 0, "bytes", "must be non-negative");
  if (bytes == 0) return;
  if (device == Device::cpu) {
    data_ = allocate_host(static_cast<std::size_t>(bytes));
  } else {
    data_ = cuda::malloc_bytes(bytes);
  }
}

Buffer::~Buffer() {
  release();
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

void Buffer::release() noexcept {
  if (!data_) return;
  if (device_ == Device::cpu) {
    std::free(data_);
  } else {
    cuda::free_bytes(data_);
  }
  data_ = nullptr;
}

TensorView Buffer::view(DType dtype, std::initializer_list<std::int64_t> shape,
                        std::int64_t offset) const {
  TensorView v = TensorView::contiguous(static_cast<char*>(data_) + offset, dtype, shape, device_);
  check_arg(offset >= 0 && offset + v.span_bytes() <= bytes_, "shape",
            "view does not fit in the buffer");
  return v;
}

void Buffer::copy_from_host(const void* src, std::int64_t bytes, std::int64_t offset) {
  check_arg(offset >= 0 && bytes >= 0 && offset + bytes <= bytes_, "bytes",
            "copy does not fit in the buffer");
  if (bytes == 0) return;
  char* dst = static_cast<char*>(data_) + offset;
  if (device_ == Device::cpu) {
    std::memcpy(dst, src, static_cast<std::size_t>(bytes));
  } else {
    cuda::copy_to_device(dst, src, bytes);
  }
}

void Buffer::copy_to_host(void* dst, std::int64_t bytes, std::int64_t offset) const {
  check_arg(offset >= 0 && bytes >= 0 && offset + bytes <= bytes_, "bytes",
            "copy does not fit in the buffer");
  if (bytes == 0) return;
  const char* src = static_cast<const char*>(data_) + offset;
  if (device_ == Device::cpu) {
    std::memcpy(dst, src, static_cast<std::size_t>(bytes));
  } else {
    cuda::copy_to_host(dst, src, bytes);
  }
}

void Buffer::fill_bytes(std::uint8_t value) {
  if (bytes_ == 0) return;
  if (device_ == Device::cpu) {
    std::memset(data_, value, static_cast<std::size_t>(bytes_));
  } else {
    cuda::fill_bytes(data_, value, bytes_);
  }
}

bool cuda_available() {
  return cuda::device_count() > 0;
}

int cuda_sm_count() {
  return cuda_available() ? cuda::sm_count() : 0;
}

void synchronize(Stream stream) {
  if (cuda_available()) cuda::synchronize(stream);
}

}  // namespace turbodecode
