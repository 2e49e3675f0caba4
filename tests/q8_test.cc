// Q8_0 quantizer and matvec on the CPU backend against the double-precision oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "hc_checks.h"

namespace turbodecode {
namespace {

TEST(Q8Cpu, QuantizeKeepsEachWeightWithinHalfAStep) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::int64_t rows = 5, cols = 96;
  auto values = testing::gaussian(static_cast<std::size_t>(rows * cols), seed);
  const auto packed = testing::random_q8_weight(rows, cols, seed);
  const auto dequantized = oracle::q8_dequantize(packed.data(), rows, cols, q8_row_bytes(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t b = 0; b < cols / 32; ++b) {
      double amax = 0.0;
      for (int j = 0; j < 32; ++j)
        amax = std::max(amax, std::fabs(values[r * cols + b * 32 + j]) * 1.0);
      const double step = amax / 127.0;
      for (int j = 0; j < 32; ++j) {
        const std::int64_t i = r * cols + b * 32 + j;
        EXPECT_NEAR(dequantized[i], values[i], 0.5 * step * 1.01 + 1e-3 * step) << i;
      }
    }
  }
}

TEST(Q8Cpu, MatvecMatchesOracle) {
  struct Case {
    std::int64_t rows, cols, tokens, pad;
  };
  testing::for_each_simd_target([] {
    for (const Case& c : {Case{1, 32, 1, 0}, Case{37, 96, 3, 2}, Case{256, 2048, 1, 0},
                          Case{64, 4096, 2, 6}, Case{37, 96, 19, 2}}) {
      const std::uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed) + ", rows " + std::to_string(c.rows) + ", cols " +
                   std::to_string(c.cols));
      testing::check_q8_matvec(Device::cpu, c.rows, c.cols, c.tokens, c.pad, seed);
    }
  });
}

// Token rows share passes over the weights in tiles; a row's result is the same alone.
TEST(Q8Cpu, MatvecTokenDoesNotDependOnTheBatch) {
  testing::for_each_simd_target([] {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(seed);
    const auto batch = testing::check_q8_matvec(Device::cpu, 37, 96, 11, 2, seed);
    const auto alone = testing::check_q8_matvec(Device::cpu, 37, 96, 1, 2, seed);
    EXPECT_TRUE(testing::bitwise_equal(testing::float_row(batch, 0, 37), alone));
  });
}

}  // namespace
}  // namespace turbodecode
