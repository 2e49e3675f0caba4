#include "device_tensor.h"

#include "argument_check.h"

namespace turbodecode::cli {
namespace {

std::int64_t count_bytes(DType dtype, const std::vector<std::int64_t>& shape) {
  std::int64_t n = static_cast<std::int64_t>(dtype_bytes(dtype));
  for (std::int64_t extent : shape) n *= extent;
  return n;
}

}  // namespace

DeviceTensor::DeviceTensor(Device device, DType dtype, const std::vector<std::int64_t>& shape)
    : shape_(shape), buffer_(device, count_bytes(dtype, shape)) {
  check_arg(shape.size() <= static_cast<std::size_t>(kMaxRank), "shape", "at most 4 dimensions");
  view_ = HostTensor{dtype, shape, {}}.view();
  view_.data = buffer_.data();
  view_.device = device;
}

DeviceTensor::DeviceTensor(Device device, const HostTensor& host)
    : DeviceTensor(device, host.dtype, host.shape) {
  upload(host.bytes.data(), static_cast<std::int64_t>(host.bytes.size()));
}

void DeviceTensor::upload(const void* data, std::int64_t bytes) {
  check_arg(bytes == buffer_.bytes(), "values", "must fill the tensor exactly");
  if (bytes > 0) buffer_.copy_from_host(data, bytes);
}

HostTensor DeviceTensor::to_host() const {
  HostTensor host = HostTensor::zeros(view_.dtype, shape_);
  if (!host.bytes.empty()) buffer_.copy_to_host(host.bytes.data(), buffer_.bytes());
  return host;
}

}  // namespace turbodecode::cli
