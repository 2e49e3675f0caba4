// Non-owning tensor views: the currency of every public call. The backend that runs a call
// is the device its tensors live on.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace turbodecode {

enum class DType : std::uint8_t { f32, f16, bf16, u8, i32 };
enum class Device : std::uint8_t { cpu, cuda };

std::size_t dtype_bytes(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);

inline constexpr int kMaxRank = 4;

// A strided view of up to kMaxRank dimensions. Strides count elements, not bytes.
// A default-constructed view (data == nullptr, rank 0) means "absent" for optional inputs.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> strides{};

  // Row-major contiguous view of `shape`.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                               Device device = Device::cpu);

  bool present() const { return data != nullptr; }
  std::int64_t numel() const;
  bool is_contiguous() const;
  // Bytes from the first element to one past the last one the view can address.
  std::int64_t span_bytes() const;
  // The same view with dimension `dim` restricted to [begin, begin + count).
  TensorView slice(int dim, std::int64_t begin, std::int64_t count) const;

  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Worker threads of the CPU backend: $TURBODECODE_THREADS, else the hardware concurrency,
// fixed when the first CPU operator runs.
int cpu_threads();

// An opaque CUDA stream (a cudaStream_t); nullptr is the legacy default stream. CPU calls
// ignore it and complete before returning.
struct Stream {
  void* handle = nullptr;
};

}  // namespace turbodecode
