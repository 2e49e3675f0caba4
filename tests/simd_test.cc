// The SIMD building blocks of the CPU backend (src/common/simd, src/attention/*-inl.h) on every
// Highway target this CPU supports, against scalar double-precision results, and the orders
// of summation they promise (bitwise).
#include <gtest/gtest.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention/row_accumulate-inl.h"
#include "attention/row_dots-inl.h"
#include "attention/row_readers-inl.h"
#include "attention/score_softmax-inl.h"
#include "common/f16.h"
#include "common/simd/lane_sums-inl.h"
#include "hwy/highway.h"
#include "test_support.h"
#include "tq/codec_math.h"
#include "tq/fp8_math.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::testing::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace simd = attention::HWY_NAMESPACE::simd;
using turbodecode::simd::HWY_NAMESPACE::store_lane_sums;
using turbodecode::simd::HWY_NAMESPACE::with_vectors;

using Tag = simd::RowTag;

// |got − want| ≤ tolerance · scale, with the values and the seed in the failure message.
void expect_close(double got, double want, double scale, double tolerance, const char* what) {
  EXPECT_LE(std::fabs(got - want), tolerance * scale) << what << ": " << got << " vs " << want;
}

// ---------------------------------------------------------------------------------------------
// Lane sums: every vector's sum in its own fixed tree, whatever its neighbours.

template <int kCount>
void check_lane_sums(std::mt19937_64& rng) {
  const Tag d;
  const auto lanes = hn::Lanes(d);
  std::normal_distribution<float> normal;
  std::vector<float> values(kCount * lanes);
  for (float& v : values) v = normal(rng);
  float sums[kCount];
  with_vectors<kCount>([&](auto i) { return hn::LoadU(d, values.data() + i * lanes); },
                       [&](const auto&... v) { store_lane_sums(d, sums, v...); });
  for (int i = 0; i < kCount; ++i) {
    double want = 0.0, scale = 0.0;
    for (std::size_t l = 0; l < lanes; ++l) {
      want += values[i * lanes + l];
      scale += std::fabs(values[i * lanes + l]);
    }
    expect_close(sums[i], want, scale, 1e-6, "lane sum");
    float alone;
    store_lane_sums(d, &alone, hn::LoadU(d, values.data() + i * lanes));
    EXPECT_EQ(alone, sums[i]) << "vector " << i << " of " << kCount;
  }
}

void lane_sums_match_double_and_ignore_neighbours(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  check_lane_sums<1>(rng);
  check_lane_sums<2>(rng);
  check_lane_sums<3>(rng);
  check_lane_sums<5>(rng);
  check_lane_sums<8>(rng);
}

// ---------------------------------------------------------------------------------------------
// Row readers: F16 widened exactly; codes (bit streams of every width) looked up exactly; FP8
// bytes as their E4M3 value / 256, NaN codes as NaN.

constexpr int kRowLength = 512;

// A codebook of 2^bits distinct values, odd about its middle as every codebook of the cache is
// (tq/tables.h; the AVX-512 lookups read the lower half only), padded to 256 entries with NaN:
// a code not masked to its width reads NaN.
std::vector<float> padded_codebook(int bits, std::mt19937_64& rng) {
  std::vector<float> codebook(256, NAN);
  std::uniform_real_distribution<float> jitter(-1.0f, 1.0f);
  const int entries = 1 << bits;
  for (int c = 0; c < entries / 2; ++c) {
    codebook[c] = jitter(rng) - 4.0f * static_cast<float>(entries / 2 - c);
    codebook[entries - 1 - c] = -codebook[c];
  }
  return codebook;
}

// Every byte random, high bits included.
std::vector<std::uint8_t> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  return bytes;
}

std::vector<std::uint16_t> random_f16(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> bits(n);
  for (auto& b : bits) b = f32_to_f16(normal(rng));
  return bits;
}

// The row's f32 values as a reader should give them.
std::vector<float> decoded_f16(const std::vector<std::uint16_t>& row) {
  std::vector<float> values(row.size());
  for (std::size_t j = 0; j < row.size(); ++j) values[j] = f16_to_f32(row[j]);
  return values;
}
std::vector<float> decoded_codes(int bits, const std::vector<std::uint8_t>& row,
                                 const std::vector<float>& codebook) {
  std::vector<float> values(kRowLength);
  for (int j = 0; j < kRowLength; ++j) values[j] = codebook[tq::read_code(row.data(), bits, j)];
  return values;
}

// The reader's values of a row against `want`, bitwise (NaN where want is NaN). The row is
// copied to the end of a buffer, so a read beyond its last byte would leave the buffer.
template <class Reader>
void expect_reads(const Reader& reader, const std::vector<std::uint8_t>& row,
                  const std::vector<float>& want, const char* what) {
  const Tag d;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const std::vector<std::uint8_t> alone(row);
  std::vector<float> got(want.size(), NAN);
  for (int j = 0; j < kRowLength; j += lanes) {
    hn::StoreU(reader.load(d, alone.data(), j), d, &got[j]);
  }
  const auto expect_values = [&](const char* how) {
    for (int j = 0; j < kRowLength; ++j) {
      if (std::isnan(want[j])) {
        EXPECT_TRUE(std::isnan(got[j])) << what << how << " element " << j;
      } else {
        EXPECT_EQ(got[j], want[j]) << what << how << " element " << j;
      }
    }
  };
  expect_values("");
  // A reader that also reads two vectors at once (pair): the same values.
  if constexpr (requires { reader.pair(d, alone.data(), 0); }) {
    std::fill(got.begin(), got.end(), NAN);
    for (int j = 0; j < kRowLength; j += 2 * lanes) {
      const auto both = reader.pair(d, alone.data(), j);
      hn::StoreU(both.first, d, &got[j]);
      hn::StoreU(both.second, d, &got[j + lanes]);
    }
    expect_values(" pair");
  }
}

template <int kBits>
void check_code_reader(std::mt19937_64& rng) {
  const std::vector<float> codebook = padded_codebook(kBits, rng);
  const std::vector<std::uint8_t> row = random_bytes(kRowLength * kBits / 8, rng);
  expect_reads(simd::CodeReader<kBits>{codebook.data()}, row, decoded_codes(kBits, row, codebook),
               ("tq" + std::to_string(kBits)).c_str());
}

// Every byte value, NaN codes included, with a scale folded out as the reader's contract says.
void check_fp8_reader(std::mt19937_64& rng) {
  std::vector<std::uint8_t> row = random_bytes(kRowLength, rng);
  for (int b = 0; b < 256; ++b) row[static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(b);
  std::vector<float> want(kRowLength);
  for (int j = 0; j < kRowLength; ++j) want[j] = fp8::decode(row[j]) / 256.0f;
  expect_reads(simd::Fp8Reader{}, row, want, "fp8");
}

void readers_give_exact_values(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<std::uint16_t> row = random_f16(kRowLength, rng);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(row.data());
  expect_reads(simd::F16Reader{}, std::vector<std::uint8_t>(bytes, bytes + 2 * kRowLength),
               decoded_f16(row), "f16");
  check_code_reader<3>(rng);
  check_code_reader<4>(rng);
  check_code_reader<5>(rng);
  check_code_reader<6>(rng);
  check_code_reader<8>(rng);
  check_fp8_reader(rng);
}

// ---------------------------------------------------------------------------------------------
// dot_rows: against double, and each (row, head) sum the same whatever Heads and Rows are.

template <int kHeads, int kRows, class Reader>
void check_dot_rows(const Reader& reader, const std::uint8_t* const* rows,
                    const std::vector<float>* values, const float* const* q, int begin, int count) {
  const Tag d;
  float dots[kRows * kHeads];
  simd::dot_rows<kHeads, kRows>(d, reader, rows, q, begin, count, dots);
  for (int r = 0; r < kRows; ++r) {
    float alone[kHeads];
    for (int h = 0; h < kHeads; ++h) {
      simd::dot_rows<1, 1>(d, reader, rows + r, q + h, begin, count, alone + h);
    }
    for (int h = 0; h < kHeads; ++h) {
      double want = 0.0, scale = 0.0;
      for (int j = begin; j < begin + count; ++j) {
        want += static_cast<double>(q[h][j]) * values[r][j];
        scale += std::fabs(static_cast<double>(q[h][j]) * values[r][j]);
      }
      expect_close(dots[r * kHeads + h], want, scale, 1e-5, "dot");
      EXPECT_EQ(alone[h], dots[r * kHeads + h]) << "row " << r << " head " << h;
    }
  }
}

// Rows the dot_rows checks read: as many as the largest block the kernel uses (one head's).
constexpr int kDotRows = simd::kDotBlockRows<1>;
static_assert(kDotRows >= simd::kDotBlockRows<2> && kDotRows >= simd::kDotBlockRows<4>);

// Every block shape the decode kernel uses (1, 2 and 4 heads; kDotBlockRows rows, then one row
// at a time).
template <class Reader>
void check_dot_rows_all_shapes(const Reader& reader, const std::uint8_t* const* rows,
                               const std::vector<float>* values, const float* const* q) {
  for (const int begin : {0, kRowLength / 2}) {
    const int count = kRowLength / 2;
    check_dot_rows<1, 1>(reader, rows, values, q, begin, count);
    check_dot_rows<1, simd::kDotBlockRows<1>>(reader, rows, values, q, begin, count);
    check_dot_rows<2, 1>(reader, rows, values, q, begin, count);
    check_dot_rows<2, simd::kDotBlockRows<2>>(reader, rows, values, q, begin, count);
    check_dot_rows<4, 1>(reader, rows, values, q, begin, count);
    check_dot_rows<4, simd::kDotBlockRows<4>>(reader, rows, values, q, begin, count);
  }
}

void dot_rows_match_double(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> q_rows[4];
  const float* q[4];
  for (int h = 0; h < 4; ++h) {
    q_rows[h] = gaussian(kRowLength, rng());
    q[h] = q_rows[h].data();
  }
  std::vector<std::uint16_t> f16_rows[kDotRows];
  const std::uint8_t* f16_pointers[kDotRows];
  std::vector<float> f16_values[kDotRows];
  for (int r = 0; r < kDotRows; ++r) {
    f16_rows[r] = random_f16(kRowLength, rng);
    f16_pointers[r] = reinterpret_cast<const std::uint8_t*>(f16_rows[r].data());
    f16_values[r] = decoded_f16(f16_rows[r]);
  }
  check_dot_rows_all_shapes(simd::F16Reader{}, f16_pointers, f16_values, q);

  // 4-bit codes (one vector at a time) and 8-bit codes (two at a time on AVX-512).
  std::vector<std::uint8_t> code_rows[kDotRows];
  const std::uint8_t* code_pointers[kDotRows];
  for (int r = 0; r < kDotRows; ++r) {
    code_rows[r] = random_bytes(kRowLength, rng);
    code_pointers[r] = code_rows[r].data();
  }
  const auto check_codes = [&](const auto& reader, int bits, const std::vector<float>& codebook) {
    std::vector<float> code_values[kDotRows];
    for (int r = 0; r < kDotRows; ++r) code_values[r] = decoded_codes(bits, code_rows[r], codebook);
    check_dot_rows_all_shapes(reader, code_pointers, code_values, q);
  };
  const std::vector<float> codebook4 = padded_codebook(4, rng);
  check_codes(simd::CodeReader<4>{codebook4.data()}, 4, codebook4);
  const std::vector<float> codebook8 = padded_codebook(8, rng);
  check_codes(simd::CodeReader<8>{codebook8.data()}, 8, codebook8);
}

// ---------------------------------------------------------------------------------------------
// accumulate_tile: bitwise one axpy per position and head, in position order, over each head's
// own positions; a NaN at a position outside a head's range never reaches it.

template <int kHeads, int kChunks>
void check_accumulate_tile(std::mt19937_64& rng, int positions) {
  const Tag d;
  const int lanes = static_cast<int>(hn::Lanes(d));
  std::vector<float> tile = gaussian(static_cast<std::size_t>(positions) * kRowLength, rng());
  const std::vector<float> coefs = gaussian(kHeads * 32, rng());
  int begin[kHeads], end[kHeads];
  std::vector<float> got[kHeads], want[kHeads];
  float* o[kHeads];
  for (int h = 0; h < kHeads; ++h) {
    begin[h] = static_cast<int>(rng() % 2) * (h % 3) % positions;          // some heads start later
    end[h] = std::max(begin[h] + 1, positions - static_cast<int>(h % 2));  // some end earlier
    if (begin[h] > 0) tile[(begin[h] - 1) * kRowLength + 5] = NAN;
    if (end[h] < positions) tile[end[h] * kRowLength + 7] = NAN;
  }
  for (int h = 0; h < kHeads; ++h) {
    got[h] = want[h] = gaussian(kRowLength, rng());
    o[h] = got[h].data();
    for (int t = begin[h]; t < end[h]; ++t) {
      simd::axpy(d, coefs[h * 32 + t], tile.data() + t * kRowLength, want[h].data(), kRowLength);
    }
  }
  const auto value = [&](int t, int j) { return hn::LoadU(d, tile.data() + t * kRowLength + j); };
  simd::accumulate_tile<kHeads, kChunks>(d, value, begin, end, coefs.data(), 32, o, kRowLength);
  for (int h = 0; h < kHeads; ++h) {
    for (int j = 0; j < kRowLength; ++j) {
      const bool same = std::isnan(want[h][j]) ? std::isnan(got[h][j]) : got[h][j] == want[h][j];
      ASSERT_TRUE(same) << kHeads << "x" << kChunks << " head " << h << " j " << j << ": "
                        << got[h][j] << " vs " << want[h][j] << ", positions [" << begin[h] << ", "
                        << end[h] << ")";
    }
  }
  EXPECT_EQ(kRowLength % (kChunks * lanes), 0);
}

void accumulate_tile_equals_axpy_per_position(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const int positions : {1, 7, 32}) {
    check_accumulate_tile<1, 4>(rng, positions);
    check_accumulate_tile<2, 4>(rng, positions);
    check_accumulate_tile<4, 2>(rng, positions);
    check_accumulate_tile<8, 1>(rng, positions);
  }
}

void axpy_and_scale_match_double(std::uint64_t seed) {
  const Tag d;
  const std::vector<float> x = gaussian(kRowLength, seed);
  std::vector<float> y = gaussian(kRowLength, seed + 1);
  const std::vector<float> y0 = y;
  simd::axpy(d, 0.75f, x.data(), y.data(), kRowLength);
  for (int j = 0; j < kRowLength; ++j) {
    expect_close(y[j], 0.75 * x[j] + y0[j], std::fabs(0.75 * x[j]) + std::fabs(y0[j]), 2.5e-7,
                 "axpy");
  }
  const std::vector<float> y1 = y;
  simd::scale(d, -3.0f, y.data(), kRowLength);
  for (int j = 0; j < kRowLength; ++j)
    expect_close(y[j], -3.0 * y1[j], 3.0 * std::fabs(y1[j]), 1.2e-7, "scale");
}

// ---------------------------------------------------------------------------------------------
// Softmax steps: the tile maximum with NaN and −inf, exp against std::exp.

void max_finds_the_maximum_and_keeps_nan(std::uint64_t seed) {
  const Tag d;
  std::vector<float> x = gaussian(32, seed);
  x[3] = -INFINITY;
  const float want = *std::max_element(x.begin(), x.end());
  EXPECT_EQ(simd::max(d, x.data(), 32), want);
  std::fill(x.begin(), x.end(), -INFINITY);
  EXPECT_EQ(simd::max(d, x.data(), 32), -INFINITY);
  for (const int at : {0, 17, 31}) {
    x = gaussian(32, seed + at);
    x[at] = NAN;
    EXPECT_TRUE(std::isnan(simd::max(d, x.data(), 32))) << "NaN at " << at;
  }
}

void exp_shifted_matches_std_exp(std::uint64_t seed) {
  const Tag d;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-95.0f, 5.0f);
  std::vector<float> x(32);
  for (float& v : x) v = uniform(rng);
  x[1] = -INFINITY;
  x[2] = NAN;
  x[4] = 4.0f;  // the shift itself: exp(0) = 1
  const float shift = 4.0f;
  std::vector<float> got = x;
  simd::exp_shifted(d, got.data(), shift, 32);
  for (int j = 0; j < 32; ++j) {
    const float v = x[j] - shift;
    if (std::isnan(x[j])) {
      EXPECT_TRUE(std::isnan(got[j])) << j;
    } else if (v < -87.3f) {
      EXPECT_EQ(got[j], 0.0f) << j << " " << v;
    } else {
      const double want = std::exp(static_cast<double>(v));
      expect_close(got[j], want, want, 4e-7, "exp");
    }
  }
  EXPECT_EQ(got[4], 1.0f);
  simd::exp_shifted(d, x.data(), -INFINITY, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(x[j], 0.0f) << j;
}

}  // namespace turbodecode::testing::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace turbodecode::testing {
namespace {

HWY_EXPORT(lane_sums_match_double_and_ignore_neighbours);
HWY_EXPORT(readers_give_exact_values);
HWY_EXPORT(dot_rows_match_double);
HWY_EXPORT(accumulate_tile_equals_axpy_per_position);
HWY_EXPORT(axpy_and_scale_match_double);
HWY_EXPORT(max_finds_the_maximum_and_keeps_nan);
HWY_EXPORT(exp_shifted_matches_std_exp);

// Runs the per-target check on every target with a fresh seed.
#define TD_SIMD_TEST(name, check)                   \
  TEST(Simd, name) {                                \
    for_each_simd_target([] {                       \
      const std::uint64_t seed = fresh_seed();      \
      SCOPED_TRACE("seed " + std::to_string(seed)); \
      HWY_DYNAMIC_DISPATCH(check)(seed);            \
    });                                             \
  }

TD_SIMD_TEST(LaneSumsMatchDoubleAndIgnoreNeighbours, lane_sums_match_double_and_ignore_neighbours)
TD_SIMD_TEST(ReadersGiveExactValues, readers_give_exact_values)
TD_SIMD_TEST(DotRowsMatchDoubleWhateverTheBlockShape, dot_rows_match_double)
TD_SIMD_TEST(AccumulateTileEqualsOneAxpyPerPosition, accumulate_tile_equals_axpy_per_position)
TD_SIMD_TEST(AxpyAndScaleMatchDouble, axpy_and_scale_match_double)
TD_SIMD_TEST(MaxFindsTheMaximumAndKeepsNaN, max_finds_the_maximum_and_keeps_nan)
TD_SIMD_TEST(ExpShiftedMatchesStdExp, exp_shifted_matches_std_exp)

}  // namespace
}  // namespace turbodecode::testing
#endif  // HWY_ONCE
