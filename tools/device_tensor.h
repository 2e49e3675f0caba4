// A tensor on the device chosen with --device (a Buffer plus a contiguous view of it), filled
// from and read back into host memory.
#pragma once

#include <cstdint>
#include <vector>

#include "turbodecode/buffer.h"
#include "turbodecode/io.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cli {

class DeviceTensor {
 public:
  // Uninitialised storage for `shape`.
  DeviceTensor(Device device, DType dtype, const std::vector<std::int64_t>& shape);
  // A device copy of a host tensor (rank <= 4).
  DeviceTensor(Device device, const HostTensor& host);
  template <class T>
  DeviceTensor(Device device, DType dtype, const std::vector<std::int64_t>& shape,
               const std::vector<T>& values)
      : DeviceTensor(device, dtype, shape) {
    upload(values.data(), static_cast<std::int64_t>(values.size() * sizeof(T)));
  }

  const TensorView& view() const { return view_; }
  // View of rows [begin, begin + count) of dimension 0.
  TensorView rows(std::int64_t begin, std::int64_t count) const {
    return view_.slice(0, begin, count);
  }
  HostTensor to_host() const;
  template <class T>
  std::vector<T> to_host_values() const {
    std::vector<T> values(static_cast<std::size_t>(buffer_.bytes()) / sizeof(T));
    buffer_.copy_to_host(values.data(), static_cast<std::int64_t>(values.size() * sizeof(T)));
    return values;
  }

 private:
  void upload(const void* data, std::int64_t bytes);

  std::vector<std::int64_t> shape_;
  Buffer buffer_;
  TensorView view_;
};

}  // namespace turbodecode::cli
