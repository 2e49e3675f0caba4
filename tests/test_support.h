// Test-only helpers: seeded random data (the seed is printed on failure), NaN poisoning,
// host/device round trips and error measures.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "turbodecode/buffer.h"
#include "turbodecode/tensor.h"

namespace turbodecode::testing {

// A fresh seed per call, reported through SCOPED_TRACE by the caller. With TD_TEST_SEED set,
// every call returns that seed instead, so a failure reported with its seed can be replayed
// (e.g. TD_TEST_SEED=71010506785770865 hc_gpu_test --gtest_filter=...): the case that drew
// it then sees the same inputs.
std::uint64_t fresh_seed();

std::vector<float> gaussian(std::size_t n, std::uint64_t seed, float stddev = 1.0f);

// Runs body() once for each SIMD target the library is compiled for and this CPU supports
// (the CPU backend dispatches at run time, so otherwise only the best one would be tested),
// with the target's name in SCOPED_TRACE. Dispatch picks the best target again afterwards.
void for_each_simd_target(const std::function<void()>& body);

// Copies host data into a new buffer on `device`.
Buffer to_device(Device device, const void* data, std::int64_t bytes);
template <class T>
Buffer to_device(Device device, const std::vector<T>& values) {
  return to_device(device, values.data(), static_cast<std::int64_t>(values.size() * sizeof(T)));
}
template <class T>
std::vector<T> to_host(const Buffer& buffer) {
  std::vector<T> out(static_cast<std::size_t>(buffer.bytes()) / sizeof(T));
  buffer.copy_to_host(out.data(), static_cast<std::int64_t>(out.size() * sizeof(T)));
  return out;
}

// ‖a − b‖₂ / ‖b‖₂ in double; NaN anywhere in a gives +inf so it can never pass.
double relative_l2(const std::vector<float>& a, const std::vector<double>& b);
double cosine(const std::vector<float>& a, const std::vector<double>& b);

}  // namespace turbodecode::testing
