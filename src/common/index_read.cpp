#include "common/index_read.h"

#include <algorithm>

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

std::vector<std::int32_t> read_elements_to_host(const TensorView& view,
                                                const std::vector<std::int64_t>& offsets,
                                                Stream stream) {
  std::vector<std::int32_t> values(offsets.size());
  if (offsets.empty()) return values;
  const auto [lowest, highest] = std::minmax_element(offsets.begin(), offsets.end());
  const std::int32_t* data = view.as<const std::int32_t>();
  std::vector<std::int32_t> staged;
  std::int64_t base = 0;
  if (view.device == Device::cuda) {
    cuda::synchronize(stream);
    base = *lowest;
    staged.resize(static_cast<std::size_t>(*highest - *lowest + 1));
    cuda::copy_to_host(staged.data(), data + base,
                       static_cast<std::int64_t>(staged.size() * sizeof(std::int32_t)));
    data = staged.data();
  }
  for (std::size_t i = 0; i < offsets.size(); ++i) values[i] = data[offsets[i] - base];
  return values;
}

}  // namespace turbodecode
