#include "common/index_read.h"

#include "common/cuda_runtime.h"

namespace turbodecode {

std::vector<std::int32_t> read_indices_to_host(const TensorView& indices, Stream stream) {
  std::vector<std::int32_t> values(static_cast<std::size_t>(indices.shape[0]));
  if (values.empty()) return values;
  const auto stride = static_cast<std::size_t>(indices.strides[0]);
  const std::int32_t* data = indices.as<const std::int32_t>();
  std::vector<std::int32_t> staged;
  if (indices.device == Device::cuda) {
    cuda::synchronize(stream);
    staged.resize(static_cast<std::size_t>(indices.span_bytes()) / sizeof(std::int32_t));
    cuda::copy_to_host(staged.data(), indices.data, indices.span_bytes());
    data = staged.data();
  }
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = data[i * stride];
  return values;
}

}  // namespace turbodecode
