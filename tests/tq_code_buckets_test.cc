// The CUDA encoders' bucket search (tq/cuda/code_buckets.h) against tq::code_of, run on the
// host with the same functions: every midpoint and bucket edge with its neighbouring floats,
// random values over and beyond the codebook's range, and the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"
#include "tq/codec_math.h"
#include "tq/cuda/code_buckets.h"

namespace turbodecode {
namespace {

namespace cb = cuda::code_buckets;

const float* midpoints_of_bits(int bits) {
  switch (bits) {
    case 3:
      return tq::kMidpoints3bit.data();
    case 4:
      return tq::kMidpoints4bit.data();
    case 5:
      return tq::kMidpoints5bit.data();
    case 6:
      return tq::kMidpoints6bit.data();
    default:
      return tq::kMidpoints8bit.data();
  }
}

// The table as the kernels build it: every code fills its buckets. Unfilled buckets keep a
// first code of −1, which the check below catches.
std::vector<cb::CodeBucket> table_of(int bits) {
  std::vector<cb::CodeBucket> table(cb::kMaxBuckets, cb::CodeBucket{0.0f, -1});
  for (int code = 0; code < (1 << bits); ++code) {
    cb::fill_buckets_of_code(code, midpoints_of_bits(bits), bits, table.data());
  }
  return table;
}

// u and the `steps` floats on either side of it.
void add_neighbourhood(float u, int steps, std::vector<float>& values) {
  float below = u, above = u;
  values.push_back(u);
  for (int s = 0; s < steps; ++s) {
    below = std::nextafter(below, -INFINITY);
    above = std::nextafter(above, INFINITY);
    values.push_back(below);
    values.push_back(above);
  }
}

class CodeBucketsTest : public ::testing::TestWithParam<int> {};

TEST_P(CodeBucketsTest, EveryBucketFilledOnceAndHoldsAtMostOneMidpoint) {
  const int bits = GetParam();
  const cb::BucketGrid grid = cb::grid_for_bits(bits);
  ASSERT_LE(grid.count, cb::kMaxBuckets);
  const auto table = table_of(bits);
  for (int b = 0; b < grid.count; ++b) EXPECT_GE(table[b].first_code, 0) << "bucket " << b;
  const float* midpoints = midpoints_of_bits(bits);
  for (int i = 0; i + 1 < (1 << bits) - 1; ++i) {
    EXPECT_LT(cb::bucket_of(midpoints[i], grid), cb::bucket_of(midpoints[i + 1], grid));
  }
  EXPECT_GT(cb::bucket_of(midpoints[0], grid), 0);
  EXPECT_LT(cb::bucket_of(midpoints[(1 << bits) - 2], grid), grid.count - 1);
}

TEST_P(CodeBucketsTest, AgreesWithBinarySearchEverywhere) {
  const int bits = GetParam();
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const cb::BucketGrid grid = cb::grid_for_bits(bits);
  const auto table = table_of(bits);
  const float* midpoints = midpoints_of_bits(bits);

  std::vector<float> values = {0.0f,
                               -0.0f,
                               INFINITY,
                               -INFINITY,
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::lowest(),
                               std::numeric_limits<float>::denorm_min()};
  for (int i = 0; i < (1 << bits) - 1; ++i) add_neighbourhood(midpoints[i], 4, values);
  for (int b = 0; b <= grid.count; ++b) {
    add_neighbourhood(grid.origin + static_cast<float>(b) / grid.per_unit, 4, values);
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-8.0f, 8.0f);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  for (int i = 0; i < 200000; ++i) values.push_back(i % 2 ? wide(rng) : normal(rng));

  std::int64_t wrong = 0;
  for (float u : values) {
    const int want = tq::code_of(u, midpoints, bits);
    const int got = cb::code_in_buckets(u, table.data(), grid);
    if (got != want && ++wrong <= 5) ADD_FAILURE() << "u = " << u << ": " << got << " != " << want;
  }
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(Bits, CodeBucketsTest, ::testing::Values(3, 4, 5, 6, 8),
                         [](const ::testing::TestParamInfo<int>& tested) {
                           return "bits" + std::to_string(tested.param);
                         });

}  // namespace
}  // namespace turbodecode
