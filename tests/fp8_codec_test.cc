// FP8 E4M3 rows, CPU backend, against the double-precision oracle (SPEC §1.6, §5, §7): codes and
// scales for every input type, decode, and the edge cases of the format (zero rows, saturation,
// subnormals, ties, NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codec_rows.h"
#include "reference/fp8_oracle.h"
#include "test_support.h"
#include "tq/fp8_math.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode {
namespace {

using testing::InputRows;
using testing::make_input;
using testing::make_output;
using testing::OutputRows;
using testing::row_of;

constexpr int kHeadDims[] = {256, 512};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Fp8Rows {
  OutputRows codes, scales;
  const std::uint8_t* code_row(std::int64_t r) const {
    return codes.view.as<const std::uint8_t>() + r * codes.view.strides[0];
  }
  float scale(std::int64_t r) const {
    return scales.view.as<const float>()[r * scales.view.strides[0]];
  }
};

Fp8Rows encode_fp8(const InputRows& in, std::int64_t pad) {
  const std::int64_t rows = in.view.shape[0];
  const auto d = static_cast<int>(in.view.shape[1]);
  Fp8Rows e{make_output(DType::u8, rows, d, d + pad), make_output(DType::f32, rows, 1, 1 + pad)};
  encode_rows({d, RowFormat::fp8, 1.0f}, in.view, e.codes.view, e.scales.view);
  return e;
}

std::vector<float> decode_fp8(const Fp8Rows& e, int d) {
  const std::int64_t rows = e.codes.view.shape[0];
  OutputRows y = make_output(DType::f32, rows, d, d);
  decode_rows({d, RowFormat::fp8, 1.0f}, e.codes.view, e.scales.view, y.view);
  return {y.view.as<float>(), y.view.as<float>() + rows * d};
}

// Library codes and scales of every row against the oracle: the scale within 1e-6 relative,
// codes equal except one E4M3 step where q sits within rounding of a boundary. Returns the
// number of such codes.
std::int64_t expect_matches_oracle(const InputRows& in, const Fp8Rows& e) {
  const std::int64_t rows = in.view.shape[0];
  const auto d = static_cast<int>(in.view.shape[1]);
  std::int64_t boundary_mismatches = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto want = oracle::fp8_encode(row_of(in.widened, r, d));
    EXPECT_NEAR(e.scale(r), want.scale, 1e-6 * want.scale) << "row " << r;
    for (int j = 0; j < d; ++j) {
      const int got = e.code_row(r)[j];
      if (got == want.codes[j]) continue;
      const bool one_step = (got & 0x80) == (want.codes[j] & 0x80) &&
                            std::abs((got & 0x7f) - (want.codes[j] & 0x7f)) == 1;
      const double distance = oracle::fp8_boundary_distance(want.scaled[j]);
      EXPECT_TRUE(one_step && distance <= oracle::kFp8BoundaryTolerance)
          << "row " << r << " element " << j << ": code " << got << ", oracle " << want.codes[j]
          << ", q " << want.scaled[j];
      ++boundary_mismatches;
    }
  }
  EXPECT_LE(boundary_mismatches * 1000, rows * d);
  testing::expect_padding_untouched(e.codes);
  testing::expect_padding_untouched(e.scales);
  return boundary_mismatches;
}

TEST(Fp8Codec, CodesAndScalesMatchOracleForEveryInputType) {
  const std::int64_t rows = 32;
  std::int64_t mismatched = 0, compared = 0;
  for (int d : kHeadDims) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (bool outliers : {false, true}) {
        const std::uint64_t seed = testing::fresh_seed();
        SCOPED_TRACE("seed " + std::to_string(seed) + " D " + std::to_string(d) + " " +
                     dtype_name(dtype) + (outliers ? " outliers" : ""));
        const InputRows in = make_input(testing::test_rows(rows, d, outliers, seed), rows, d, dtype,
                                        outliers ? d + 24 : d);
        mismatched += expect_matches_oracle(in, encode_fp8(in, outliers ? 5 : 0));
        compared += rows * d;
      }
    }
  }
  std::cout << "[ measured ] FP8 codes one step from the oracle's at a boundary: " << mismatched
            << " of " << compared << "\n";
}

TEST(Fp8Codec, DecodeMatchesOracle) {
  for (int d : kHeadDims) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const std::int64_t rows = 8;
    Fp8Rows e{make_output(DType::u8, rows, d, d), make_output(DType::f32, rows, 1, 1)};
    for (std::int64_t i = 0; i < rows * d; ++i) {
      e.codes.view.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(rng());
    }
    std::uniform_real_distribution<float> scale(0.0f, 3.0f);
    for (std::int64_t r = 0; r < rows; ++r) e.scales.view.as<float>()[r] = scale(rng);
    const std::vector<float> y = decode_fp8(e, d);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<int> codes(e.code_row(r), e.code_row(r) + d);
      const auto want = oracle::fp8_decode(codes, e.scale(r));
      for (int j = 0; j < d; ++j) {
        const float got = y[r * d + j];
        if (std::isnan(want[j])) {
          ASSERT_TRUE(std::isnan(got)) << "row " << r << " code " << codes[j];
        } else {
          ASSERT_NEAR(got, want[j], 1e-6 * std::abs(want[j]))
              << "row " << r << " code " << codes[j];
        }
      }
    }
  }
}

// The element encoder saturates to ±448 instead of rounding up into the NaN code, and the
// largest element of a row, whatever its magnitude, encodes to ±448.
TEST(Fp8Codec, SaturatesToLargestFinite) {
  for (float q : {448.0f, 463.9f, 464.0f, 470.0f, 479.9f, 480.0f, 1e30f,
                  std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(fp8::encode(q, 1.0f), 0x7e) << q;
    EXPECT_EQ(fp8::encode(-q, 1.0f), 0xfe) << q;
  }
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
  const int d = 256;
  const std::int64_t rows = 64;
  std::vector<float> x = testing::gaussian(rows * d, seed + 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float amax = std::pow(10.0f, exponent(rng));
    for (int j = 0; j < d; ++j) x[r * d + j] *= amax / 8.0f;
    x[r * d + r % d] = r % 2 ? amax : -amax;
  }
  const InputRows in = make_input(x, rows, d, DType::f32, d);
  const Fp8Rows e = encode_fp8(in, 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(e.code_row(r)[r % d], r % 2 ? 0x7e : 0xfe) << "row " << r;
  }
  expect_matches_oracle(in, e);
}

// Scale 1 (amax 448): values below 2^-6 take the subnormal steps of 2^-9, ties go to the even
// code (7.5 steps to the first normal value), f32 subnormal inputs round to zero, and every
// value comes back exactly.
TEST(Fp8Codec, SubnormalsAndTiesRoundToNearestEven) {
  const int d = 256;
  const float step = std::ldexp(1.0f, -9);
  const std::vector<std::pair<float, int>> cases = {
      {0.0f, 0x00},         {step, 0x01},        {0.5f * step, 0x00}, {1.5f * step, 0x02},
      {2.5f * step, 0x02},  {7.0f * step, 0x07}, {7.5f * step, 0x08}, {8.0f * step, 0x08},
      {-3.0f * step, 0x83}, {1e-40f, 0x00},      {-0.0f, 0x80},       {1.0f, 0x38},
      {1.0625f, 0x38},      {1.1875f, 0x3a},     {3.0f, 0x40 | 0x04}, {-240.0f, 0xf7}};
  std::vector<float> x(d, 0.0f);
  x[d - 1] = 448.0f;
  for (std::size_t i = 0; i < cases.size(); ++i) x[i] = cases[i].first;
  const InputRows in = make_input(x, 1, d, DType::f32, d);
  const Fp8Rows e = encode_fp8(in, 0);
  EXPECT_EQ(e.scale(0), 1.0f);
  const std::vector<float> y = decode_fp8(e, d);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(e.code_row(0)[i], cases[i].second) << "value " << cases[i].first;
    EXPECT_EQ(y[i], static_cast<float>(oracle::fp8_value(cases[i].second))) << cases[i].first;
  }
  expect_matches_oracle(in, e);
}

// A zero row stores scale 0 and codes 0 and decodes to zeros; a NaN element takes the NaN code
// and spoils nothing else, even in an otherwise zero row.
TEST(Fp8Codec, ZeroRowsAndNanElements) {
  for (int d : kHeadDims) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " D " + std::to_string(d));
    std::vector<float> x(static_cast<std::size_t>(3 * d), 0.0f);
    const std::vector<float> noise = testing::gaussian(static_cast<std::size_t>(d), seed);
    for (int j = 0; j < d; ++j) x[d + j] = noise[j];
    x[d + 17] = kNaN;
    x[2 * d + 5] = kNaN;
    const InputRows in = make_input(x, 3, d, DType::f32, d);
    const Fp8Rows e = encode_fp8(in, 0);
    const std::vector<float> y = decode_fp8(e, d);
    EXPECT_EQ(e.scale(0), 0.0f);
    EXPECT_EQ(e.scale(2), 0.0f);
    for (int j = 0; j < d; ++j) {
      EXPECT_EQ(e.code_row(0)[j], 0) << j;
      EXPECT_EQ(y[j], 0.0f) << j;
      EXPECT_EQ(e.code_row(2)[j], j == 5 ? 0x7f : 0x00) << j;
      EXPECT_EQ(std::isnan(y[d + j]), j == 17) << j;
    }
    const auto want = oracle::fp8_encode(row_of(in.widened, 1, d));
    EXPECT_NEAR(e.scale(1), want.scale, 1e-6 * want.scale);
    EXPECT_EQ(e.code_row(1)[17], 0x7f);
  }
}

}  // namespace
}  // namespace turbodecode
