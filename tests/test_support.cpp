#include "test_support.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "hwy/targets.h"

namespace turbodecode::testing {

std::uint64_t fresh_seed() {
  if (const char* replay = std::getenv("TD_TEST_SEED"); replay != nullptr) {
    return std::strtoull(replay, nullptr, 10);
  }
  static std::uint64_t counter = 0;
  const auto now = static_cast<std::uint64_t>(
      std::chrono::high_resolution_clock::now().time_since_epoch().count());
  return now ^ (0x9e3779b97f4a7c15ull * ++counter);
}

std::vector<float> gaussian(std::size_t n, std::uint64_t seed, float stddev) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> out(n);
  for (auto& v : out) v = dist(rng);
  return out;
}

void for_each_simd_target(const std::function<void()>& body) {
  struct BestTargetAfterwards {
    ~BestTargetAfterwards() { hwy::SetSupportedTargetsForTest(0); }
  } restore;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(std::string("SIMD target ") + hwy::TargetName(target));
    body();
  }
}

Buffer to_device(Device device, const void* data, std::int64_t bytes) {
  Buffer buffer(device, bytes);
  buffer.copy_from_host(data, bytes);
  return buffer;
}

double relative_l2(const std::vector<float>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
  double dot = 0.0, na = 0.0, nb = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return -2.0;
    dot += a[i] * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += b[i] * b[i];
  }
  if (na == 0.0 && nb == 0.0) return 1.0;
  return dot / std::sqrt(na * nb);
}

}  // namespace turbodecode::testing
