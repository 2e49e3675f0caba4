// Random cache contents shared by the CPU and CUDA attention tests.
#pragma once

#include <cstdint>
#include <random>

#include "turbodecode/kv_cache.h"
#include "turbodecode/tensor.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::testing {

// Fills every row of a host cache: each F16 element is `f16_value()` (an f16 bit pattern),
// TQ codes are uniform over the codebook, norms of the size rows of N(0, 1) values have
// (D = 256 stores ‖y‖ ≈ 16, D = 512 the RMS of each half ≈ 1); FP8 as said below.
template <class F16Value>
void fill_random_cache(const KvCacheView& cache, std::mt19937_64& rng, F16Value f16_value) {
  const KvCacheConfig& c = cache.config;
  const auto fill_side = [&](RowFormat format, const TensorView& rows, const TensorView& norms) {
    const std::int64_t n = rows.numel();
    if (format == RowFormat::f16) {
      auto* data = rows.as<std::uint16_t>();
      for (std::int64_t i = 0; i < n; ++i) data[i] = f16_value();
      return;
    }
    // Every bit of a TQ row belongs to a code (SPEC §1.5): any byte is a valid one. FP8 rows
    // take any code but NaN's.
    const bool fp8 = format == RowFormat::fp8;
    auto* codes = rows.as<std::uint8_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      codes[i] = static_cast<std::uint8_t>(rng());
      if (fp8 && (codes[i] & 0x7f) == 0x7f) codes[i] ^= 1;
    }
    // FP8 scales of rows whose largest magnitude is 1 to 8.
    const float low = fp8 ? 1.0f / 448 : c.head_dim == 256 ? 8.0f : 0.5f;
    const float high = fp8 ? 8.0f / 448 : c.head_dim == 256 ? 24.0f : 1.5f;
    std::uniform_real_distribution<float> norm(low, high);
    auto* values = norms.as<float>();
    for (std::int64_t i = 0; i < norms.numel(); ++i) values[i] = norm(rng);
  };
  fill_side(c.k_format, cache.k, cache.k_norms);
  fill_side(c.v_format, cache.v, cache.v_norms);
}

}  // namespace turbodecode::testing
