#include "synthetic_kv.h"

#include <cmath>
#include <numbers>

#include "parallel_for.h"

namespace turbodecode::cli {
namespace {

constexpr double kNoiseCorrelation = 0.9;
constexpr int kOutliersPerHead = 4;
constexpr double kOutlierMinFactor = 10.0;
constexpr double kOutlierMaxFactor = 50.0;
// How strongly a query follows its current key, and the logit temperature.
constexpr double kQueryKeyWeight = 0.35;
constexpr double kQueryGain = 1.5;

// splitmix64: a small, fast generator; each head owns one, so the data does not depend on
// how heads are spread over threads.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Unit-variance, zero-mean noise: a sum of four uniforms (cheap; tails do not matter here).
  double noise() { return (uniform() + uniform() + uniform() + uniform() - 2.0) * std::sqrt(3.0); }
  double log_uniform(double low, double high) {
    return low * std::exp(uniform() * std::log(high / low));
  }

 private:
  std::uint64_t state_;
};

std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream) {
  return Random(seed ^ (stream * 0xd1b54a32d192ed03ull)).next();
}

}  // namespace

SyntheticRows::SyntheticRows(int n_kv_heads, int head_dim, std::int64_t positions,
                             std::uint64_t seed)
    : n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      positions_(positions),
      scales_(static_cast<std::size_t>(n_kv_heads) * head_dim),
      rows_(static_cast<std::size_t>(positions * n_kv_heads * head_dim)) {
  parallel_for(n_kv_heads, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t h = begin; h < end; ++h)
      generate_head(static_cast<int>(h), mix_seed(seed, h));
  });
}

void SyntheticRows::generate_head(int head, std::uint64_t seed) {
  Random random(seed);
  const auto dim = static_cast<std::size_t>(head_dim_);
  std::vector<double> offset(dim), amplitude(dim), noise(dim), cos_step(dim), sin_step(dim);
  std::vector<double> phase_cos(dim), phase_sin(dim);
  float* scale = scales_.data() + head * dim;
  for (std::size_t c = 0; c < dim; ++c) {
    scale[c] = static_cast<float>(std::exp(0.4 * random.noise()));
    offset[c] = 0.5 * random.noise();
    amplitude[c] = 0.5 + random.uniform();
    const double omega = random.log_uniform(1e-3, 0.2);
    const double phase = 2.0 * std::numbers::pi * random.uniform();
    cos_step[c] = std::cos(omega);
    sin_step[c] = std::sin(omega);
    phase_cos[c] = std::cos(phase);
    phase_sin[c] = std::sin(phase);
    noise[c] = random.noise();
  }
  for (int i = 0; i < kOutliersPerHead; ++i) {
    scale[random.next() % dim] *= static_cast<float>(
        kOutlierMinFactor + (kOutlierMaxFactor - kOutlierMinFactor) * random.uniform());
  }
  const double innovation = std::sqrt(1.0 - kNoiseCorrelation * kNoiseCorrelation);
  for (std::int64_t p = 0; p < positions_; ++p) {
    float* out = rows_.data() + (p * n_kv_heads_ + head) * head_dim_;
    for (std::size_t c = 0; c < dim; ++c) {
      noise[c] = kNoiseCorrelation * noise[c] + innovation * random.noise();
      out[c] = scale[c] * static_cast<float>(offset[c] + amplitude[c] * phase_sin[c] + noise[c]);
      // Advance sin/cos(ω·p + φ) by one position with a rotation instead of calling sin().
      const double next_cos = phase_cos[c] * cos_step[c] - phase_sin[c] * sin_step[c];
      phase_sin[c] = phase_sin[c] * cos_step[c] + phase_cos[c] * sin_step[c];
      phase_cos[c] = next_cos;
    }
  }
}

const float* SyntheticRows::row(std::int64_t p) const {
  return rows_.data() + p * n_kv_heads_ * head_dim_;
}

float SyntheticRows::channel_scale(int head, int channel) const {
  return scales_[static_cast<std::size_t>(head * head_dim_ + channel)];
}

std::vector<float> synthetic_query(const SyntheticRows& keys, int n_heads, std::int64_t p,
                                   std::uint64_t seed) {
  Random random(mix_seed(seed, static_cast<std::uint64_t>(p)));
  const int dim = keys.head_dim();
  const int group = n_heads / keys.n_kv_heads();
  const double own_weight = std::sqrt(1.0 - kQueryKeyWeight * kQueryKeyWeight);
  std::vector<float> query(static_cast<std::size_t>(n_heads * dim));
  for (int h = 0; h < n_heads; ++h) {
    const int kv = h / group;
    const float* key = keys.row(p) + kv * dim;
    for (int c = 0; c < dim; ++c) {
      const double scale = keys.channel_scale(kv, c);
      const double whitened_key = key[c] / scale;
      query[static_cast<std::size_t>(h * dim + c)] = static_cast<float>(
          kQueryGain * (kQueryKeyWeight * whitened_key + own_weight * random.noise()) / scale);
    }
  }
  return query;
}

}  // namespace turbodecode::cli
