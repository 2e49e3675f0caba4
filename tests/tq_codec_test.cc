// TurboQuant-HB codec, CPU backend, against the double-precision oracle (SPEC §1.1-1.2, §1.5,
// §5, §7), and the round-trip quality of every quantized row format.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codec_agreement.h"
#include "codec_rows.h"
#include "reference/tq_oracle.h"
#include "test_support.h"
#include "tq/tables.h"
#include "turbodecode/buffer.h"
#include "turbodecode/error.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode {
namespace {

using testing::expect_padding_untouched;
using testing::InputRows;
using testing::make_input;
using testing::make_output;
using testing::OutputRows;
using testing::row_of;
using testing::test_rows;

constexpr RowFormat kTqFormats[] = {RowFormat::tq3, RowFormat::tq4, RowFormat::tq5, RowFormat::tq6,
                                    RowFormat::tq8};
constexpr int kHeadDims[] = {256, 512};
// u may land on the other side of a decision boundary when f32 and double rotations disagree
// by rounding (oracle::kTqBoundaryTolerance); as in SPEC §5, at most 0.1% of codes may.
constexpr double kMaxBoundaryMismatchFraction = 1e-3;

bool all_bytes_are(const Buffer& buffer, std::uint8_t value) {
  const auto* bytes = static_cast<const std::uint8_t*>(buffer.data());
  for (std::int64_t i = 0; i < buffer.bytes(); ++i) {
    if (bytes[i] != value) return false;
  }
  return true;
}

struct Encoded {
  OutputRows codes, norms;
};

Encoded encode_with_library(const CodecParams& params, const TensorView& x, std::int64_t pad) {
  const std::int64_t rows = x.shape[0];
  const std::int64_t code_bytes = row_bytes(params.format, params.head_dim);
  const int npp = row_scales(params.format, params.head_dim);
  Encoded e{make_output(DType::u8, rows, code_bytes, code_bytes + pad),
            make_output(DType::f32, rows, npp, npp + pad)};
  encode_rows(params, x, e.codes.view, e.norms.view);
  return e;
}

// Library codes and norms of every row against the oracle's encode of the same inputs.
// Adds the number of codes that differ from the oracle's (by one, at a boundary) to *mismatched.
void expect_matches_oracle(const CodecParams& params, const InputRows& in, const Encoded& e,
                           std::int64_t* mismatched = nullptr) {
  const int d = params.head_dim, bits = format_bits(params.format);
  std::int64_t boundary_mismatches = 0;
  const std::int64_t rows = in.view.shape[0];
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::vector<double> x = row_of(in.widened, r, d);
    const auto want = oracle::tq_encode(d, bits, params.scale_factor_d512, x);
    const auto* code_row = e.codes.view.as<std::uint8_t>() + r * e.codes.view.strides[0];
    const std::vector<int> got = oracle::tq_unpack_codes(d, bits, code_row);
    for (int b = 0; b < norms_per_row(d); ++b) {
      const float norm = e.norms.view.as<float>()[r * e.norms.view.strides[0] + b];
      ASSERT_NEAR(norm, want.norms[b], 1e-6 * want.norms[b] + 1e-30) << "row " << r;
    }
    for (int j = 0; j < d; ++j) {
      if (got[j] == want.codes[j]) continue;
      const double distance = oracle::tq_boundary_distance(bits, want.scaled[j]);
      ASSERT_TRUE(std::abs(got[j] - want.codes[j]) == 1 && distance <= oracle::kTqBoundaryTolerance)
          << "row " << r << " element " << j << ": code " << got[j] << ", oracle " << want.codes[j]
          << ", u " << want.scaled[j] << " is " << distance << " from a boundary";
      ++boundary_mismatches;
    }
  }
  EXPECT_LE(boundary_mismatches, kMaxBoundaryMismatchFraction * double(rows * d));
  if (mismatched) *mismatched += boundary_mismatches;
  expect_padding_untouched(e.codes);
  expect_padding_untouched(e.norms);
}

// Every quantized format, FP8 included, measured the same way: encode, decode, and for TQ
// un-rotate, then the mean cosine against the input rows.
TEST(RowCodec, RoundTripCosineMeetsSpec) {
  const std::int64_t rows = 128;
  for (int d : kHeadDims) {
    for (RowFormat format : kRowFormats) {
      if (!is_quantized(format)) continue;
      for (bool outliers : {false, true}) {
        const std::uint64_t seed = testing::fresh_seed();
        SCOPED_TRACE("seed " + std::to_string(seed));
        const std::vector<float> x = test_rows(rows, d, outliers, seed);
        const InputRows in = make_input(x, rows, d, DType::f32, d);
        const CodecParams params{d, format, 1.0f};
        const Encoded e = encode_with_library(params, in.view, 0);
        OutputRows y = make_output(DType::f32, rows, d, d);
        decode_rows(params, e.codes.view, e.norms.view, y.view);
        if (is_turboquant(format)) unrotate_rows(d, y.view, y.view);
        double sum = 0.0;
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::vector<float> got(y.view.as<float>() + r * d,
                                       y.view.as<float>() + (r + 1) * d);
          sum += testing::cosine(got, row_of(in.widened, r, d));
        }
        const double mean = sum / double(rows);
        const std::string name = std::string("cosine_d") + std::to_string(d) + "_" +
                                 format_name(format) + (outliers ? "_outliers" : "_gaussian");
        RecordProperty(name, std::to_string(mean));
        std::cout << "[ measured ] " << name << " = " << mean << "\n";
        EXPECT_GE(mean, testing::min_round_trip_cosine(format)) << name;
      }
    }
  }
}

TEST(TqCodec, CodesAndNormsMatchOracleForEveryInputType) {
  const std::int64_t rows = 24;
  std::int64_t mismatched = 0, compared = 0;
  for (int d : kHeadDims) {
    for (RowFormat format : kTqFormats) {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        for (bool strided : {false, true}) {
          const float scale_factor = d == 512 && strided ? 2.5f : 1.0f;
          const std::uint64_t seed = testing::fresh_seed();
          SCOPED_TRACE("seed " + std::to_string(seed) + " D " + std::to_string(d) + " " +
                       format_name(format) + " " + dtype_name(dtype) + (strided ? " strided" : ""));
          const InputRows in = make_input(test_rows(rows, d, dtype == DType::bf16, seed), rows, d,
                                          dtype, strided ? d + 40 : d);
          const CodecParams params{d, format, scale_factor};
          const Encoded e = encode_with_library(params, in.view, strided ? 3 : 0);
          expect_matches_oracle(params, in, e, &mismatched);
          compared += rows * d;
        }
      }
    }
  }
  RecordProperty("boundary_mismatched_codes", std::to_string(mismatched));
  std::cout << "[ measured ] codes differing from the oracle by one at a boundary: " << mismatched
            << " of " << compared << "\n";
}

TEST(TqCodec, DecodeMatchesOracle) {
  const std::int64_t rows = 16;
  for (int d : kHeadDims) {
    for (RowFormat format : kTqFormats) {
      const std::uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed));
      std::mt19937_64 rng(seed);
      const int bits = format_bits(format), npp = norms_per_row(d);
      const float scale_factor = d == 512 ? 0.8f : 1.0f;
      const std::int64_t code_bytes = row_bytes(format, d);
      OutputRows codes = make_output(DType::u8, rows, code_bytes, code_bytes);
      OutputRows norms = make_output(DType::f32, rows, npp, npp);
      // Every bit of a row belongs to a code (SPEC §1.5): any byte is a valid one.
      std::uniform_int_distribution<int> byte(0, 255);
      std::uniform_real_distribution<float> norm(0.0f, 40.0f);
      for (std::int64_t i = 0; i < rows * code_bytes; ++i)
        codes.view.as<std::uint8_t>()[i] = byte(rng);
      for (std::int64_t i = 0; i < rows * npp; ++i) norms.view.as<float>()[i] = norm(rng);
      norms.view.as<float>()[0] = 0.0f;
      OutputRows y = make_output(DType::f32, rows, d, d + 8);
      const CodecParams params{d, format, scale_factor};
      decode_rows(params, codes.view, norms.view, y.view);
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto codes_r =
            oracle::tq_unpack_codes(d, bits, codes.view.as<std::uint8_t>() + r * code_bytes);
        const std::vector<double> norms_r(norms.view.as<float>() + r * npp,
                                          norms.view.as<float>() + (r + 1) * npp);
        const auto want = oracle::tq_decode(d, bits, scale_factor, codes_r, norms_r);
        for (int j = 0; j < d; ++j) {
          const float got = y.view.as<float>()[r * y.view.strides[0] + j];
          ASSERT_NEAR(got, want[j], 1e-6 * std::abs(want[j])) << "row " << r << " element " << j;
        }
      }
      expect_padding_untouched(y);
    }
  }
}

TEST(TqCodec, RotationMatchesOracleAndInverts) {
  const std::int64_t rows = 12;
  for (int d : kHeadDims) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const InputRows in = make_input(test_rows(rows, d, true, seed), rows, d, DType::f32, d + 16);
    OutputRows rotated = make_output(DType::f32, rows, d, d + 4);
    OutputRows restored = make_output(DType::f32, rows, d, d);
    rotate_rows(d, in.view, rotated.view);
    unrotate_rows(d, rotated.view, restored.view);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<double> x = row_of(in.widened, r, d);
      const auto want = oracle::tq_rotate(d, x);
      const float* got = rotated.view.as<float>() + r * rotated.view.strides[0];
      EXPECT_LE(testing::relative_l2(std::vector<float>(got, got + d), want), 1e-6) << r;
      const float* back = restored.view.as<float>() + r * d;
      EXPECT_LE(testing::relative_l2(std::vector<float>(back, back + d), x), 2e-6) << r;
      // The oracle's inverse undoes the library's forward rotation too.
      const auto unrotated = oracle::tq_unrotate(d, std::vector<double>(got, got + d));
      EXPECT_LE(testing::relative_l2(std::vector<float>(back, back + d), unrotated), 1e-6) << r;
    }
    expect_padding_untouched(rotated);
    // In place (the same view as input and output) gives the same bits as out of place.
    const std::vector<float> same_values(in.widened.begin(), in.widened.end());
    InputRows in_place = make_input(same_values, rows, d, DType::f32, d);
    rotate_rows(d, in_place.view, in_place.view);
    for (std::int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(
          0, std::memcmp(in_place.view.as<float>() + r * d,
                         rotated.view.as<float>() + r * rotated.view.strides[0], sizeof(float) * d))
          << r;
    }
  }
}

TEST(TqCodec, ZeroAndTinyRowsScaleByZero) {
  for (int d : kHeadDims) {
    for (RowFormat format : kTqFormats) {
      const std::uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed) + " D " + std::to_string(d) + " " +
                   format_name(format));
      // Row 0 all zero, row 1 with a norm far below 1e-10, row 2 (D = 512) one zero half.
      std::vector<float> x(static_cast<std::size_t>(3 * d), 0.0f);
      for (int j = 0; j < d; ++j) x[d + j] = 1e-13f;
      const std::vector<float> noise = testing::gaussian(static_cast<std::size_t>(d), seed);
      for (int j = d / 2; j < d; ++j) x[2 * d + j] = noise[j];
      const InputRows in = make_input(x, 3, d, DType::f32, d);
      const CodecParams params{d, format, 1.0f};
      const Encoded e = encode_with_library(params, in.view, 0);
      const int bits = format_bits(format);
      const int middle_code = (1 << (bits - 1)) - 1;  // u = 0 ties to the lower centroid
      for (std::int64_t r = 0; r < 2; ++r) {
        const auto codes = oracle::tq_unpack_codes(
            d, bits, e.codes.view.as<std::uint8_t>() + r * e.codes.view.strides[0]);
        for (int j = 0; j < d; ++j) ASSERT_EQ(codes[j], middle_code) << "row " << r;
      }
      EXPECT_EQ(e.norms.view.as<float>()[0], 0.0f);
      EXPECT_GT(e.norms.view.as<float>()[e.norms.view.strides[0]], 0.0f);  // stored as computed
      expect_matches_oracle(params, in, e);
      OutputRows y = make_output(DType::f32, 3, d, d);
      decode_rows(params, e.codes.view, e.norms.view, y.view);
      for (int j = 0; j < d; ++j) ASSERT_EQ(y.view.as<float>()[j], 0.0f);
    }
  }
}

// The stored row of `codes` as SPEC §1.2 and §1.5 describe it, packed here independently of
// the library: 8 bits one byte per code; 4 bits two per byte, the even element low; 3, 5 and 6
// bits little-endian groups of g codes in n bytes (8 in 3, 8 in 5, 4 in 3).
std::vector<std::uint8_t> spec_packed_row(const std::vector<int>& codes, int bits) {
  std::vector<std::uint8_t> bytes;
  if (bits == 8 || bits == 4) {
    const int per_byte = 8 / bits;
    for (std::size_t j = 0; j < codes.size(); j += per_byte) {
      bytes.push_back(
          static_cast<std::uint8_t>(bits == 8 ? codes[j] : codes[j] + 16 * codes[j + 1]));
    }
    return bytes;
  }
  const std::size_t group_codes = bits == 6 ? 4 : 8;
  const int group_bytes = bits * static_cast<int>(group_codes) / 8;
  for (std::size_t g = 0; g < codes.size(); g += group_codes) {
    std::uint64_t group = 0;
    for (std::size_t i = 0; i < group_codes; ++i) {
      group += static_cast<std::uint64_t>(codes[g + i]) << (bits * i);
    }
    for (int k = 0; k < group_bytes; ++k)
      bytes.push_back(static_cast<std::uint8_t>(group >> (8 * k)));
  }
  return bytes;
}

// Codes chosen up front come back packed as SPEC §1.5 says, for every TQ width. D = 512 with
// scale_factor_d512 = n_b makes u equal the rotated values themselves, which sit on centroids,
// far from any decision boundary.
TEST(TqCodec, CodesPackAsSpecSays) {
  const int d = 512;
  for (RowFormat format : kTqFormats) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + format_name(format));
    std::mt19937_64 rng(seed);
    const int bits = format_bits(format), levels = 1 << bits;
    // Both halves hold every code equally often (so the same RMS n_b), in random order.
    std::vector<int> chosen(d);
    for (int j = 0; j < d; ++j) chosen[j] = j % levels;
    std::shuffle(chosen.begin(), chosen.begin() + 256, rng);
    std::shuffle(chosen.begin() + 256, chosen.end(), rng);
    const auto book = tq::codebook(bits);
    std::vector<double> y(d);
    double half_squares = 0.0;
    for (int j = 0; j < d; ++j) {
      y[j] = book[chosen[j]];
      if (j < 256) half_squares += y[j] * y[j];
    }
    const float rms = static_cast<float>(std::sqrt(half_squares / 256.0));
    const std::vector<double> x = oracle::tq_unrotate(d, y);
    const InputRows in = make_input(std::vector<float>(x.begin(), x.end()), 1, d, DType::f32, d);
    const CodecParams params{d, format, rms};
    const Encoded e = encode_with_library(params, in.view, 0);
    const std::vector<std::uint8_t> want = spec_packed_row(chosen, bits);
    ASSERT_EQ(static_cast<std::int64_t>(want.size()), row_bytes(format, d));
    const auto* got = e.codes.view.as<std::uint8_t>();
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "byte " << i;
    expect_matches_oracle(params, in, e);
  }
}

// Valid encode arguments over poisoned outputs; each bad-input case breaks one rule.
struct EncodeCall {
  CodecParams params{256, RowFormat::tq8, 1.0f};
  InputRows in = make_input(testing::gaussian(4 * 256, 7), 4, 256, DType::f32, 256);
  OutputRows codes = make_output(DType::u8, 4, 256, 256);
  OutputRows norms = make_output(DType::f32, 4, 1, 1);
};

void expect_rejected(const std::string& argument, const std::function<void()>& call,
                     const std::vector<const Buffer*>& outputs) {
  SCOPED_TRACE("expected rejection of '" + argument + "'");
  try {
    call();
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_FALSE(e.rule().empty());
  }
  for (const Buffer* out : outputs) EXPECT_TRUE(all_bytes_are(*out, 0xFF)) << "output written";
}

TEST(TqCodec, EncodeRejectsBadInputWithoutWriting) {
  using Mutation = std::function<void(EncodeCall&)>;
  const std::vector<std::pair<std::string, Mutation>> cases = {
      {"head_dim", [](EncodeCall& c) { c.params.head_dim = 128; }},
      {"format", [](EncodeCall& c) { c.params.format = RowFormat::f16; }},
      {"format", [](EncodeCall& c) { c.params.format = static_cast<RowFormat>(42); }},
      {"norms",
       [](EncodeCall& c) {
         c.params.format = RowFormat::fp8;  // one scale per row, where TQ keeps norms_per_row
         c.params.head_dim = 512;
         c.in = make_input(testing::gaussian(4 * 512, 7), 4, 512, DType::f32, 512);
         c.codes = make_output(DType::u8, 4, 512, 512);
         c.norms = make_output(DType::f32, 4, 2, 2);
       }},
      {"scale_factor_d512", [](EncodeCall& c) { c.params.scale_factor_d512 = 0.0f; }},
      {"scale_factor_d512",
       [](EncodeCall& c) { c.params.scale_factor_d512 = std::numeric_limits<float>::quiet_NaN(); }},
      {"x", [](EncodeCall& c) { c.in.view.data = nullptr; }},
      {"x", [](EncodeCall& c) { c.in.view.dtype = DType::i32; }},
      {"x", [](EncodeCall& c) { c.in.view.shape[1] = 255; }},
      {"x", [](EncodeCall& c) { c.in.view.shape[0] = -1; }},
      {"x", [](EncodeCall& c) { c.in.view.rank = 3; }},
      {"x", [](EncodeCall& c) { c.in.view.strides[1] = 2; }},
      {"x", [](EncodeCall& c) { c.in.view.data = c.in.view.as<char>() + 2; }},
      {"codes", [](EncodeCall& c) { c.codes.view.dtype = DType::f32; }},
      {"codes", [](EncodeCall& c) { c.codes.view.shape[1] = 128; }},
      {"codes", [](EncodeCall& c) { c.codes.view.shape[0] = 3; }},
      {"codes", [](EncodeCall& c) { c.codes.view.device = Device::cuda; }},
      {"codes",
       [](EncodeCall& c) {
         c.codes.view.data = c.in.view.data;  // aliases the input
       }},
      {"norms", [](EncodeCall& c) { c.norms.view.shape[1] = 2; }},
      {"norms", [](EncodeCall& c) { c.norms.view.dtype = DType::f16; }},
      {"norms", [](EncodeCall& c) { c.norms.view.data = c.codes.view.data; }},
  };
  for (const auto& [argument, mutate] : cases) {
    EncodeCall call;
    mutate(call);
    expect_rejected(
        argument, [&] { encode_rows(call.params, call.in.view, call.codes.view, call.norms.view); },
        {&call.codes.storage, &call.norms.storage});
  }
}

TEST(TqCodec, DecodeAndRotateRejectBadInputWithoutWriting) {
  OutputRows codes = make_output(DType::u8, 4, 256, 256);
  OutputRows norms = make_output(DType::f32, 4, 1, 1);
  std::memset(codes.storage.data(), 0, 4 * 256);
  const CodecParams params{256, RowFormat::tq8, 1.0f};
  using Mutation = std::function<void(CodecParams&, TensorView&, TensorView&, TensorView&)>;
  const std::vector<std::pair<std::string, Mutation>> decode_cases = {
      {"head_dim", [](CodecParams& p, TensorView&, TensorView&, TensorView&) { p.head_dim = 64; }},
      {"format",
       [](CodecParams& p, TensorView&, TensorView&, TensorView&) { p.format = RowFormat::f16; }},
      {"codes", [](CodecParams&, TensorView& c, TensorView&, TensorView&) { c.data = nullptr; }},
      {"codes", [](CodecParams&, TensorView& c, TensorView&, TensorView&) { c.shape[1] = 128; }},
      {"norms", [](CodecParams&, TensorView&, TensorView& n, TensorView&) { n.shape[0] = 5; }},
      {"y", [](CodecParams&, TensorView&, TensorView&, TensorView& y) { y.dtype = DType::f16; }},
      {"y", [](CodecParams&, TensorView&, TensorView&, TensorView& y) { y.shape[1] = 512; }},
      {"y", [](CodecParams&, TensorView& c, TensorView&, TensorView& y) { y.data = c.data; }},
  };
  for (const auto& [argument, mutate] : decode_cases) {
    OutputRows y = make_output(DType::f32, 4, 256, 256);
    CodecParams p = params;
    TensorView c = codes.view, n = norms.view, out = y.view;
    mutate(p, c, n, out);
    expect_rejected(argument, [&] { decode_rows(p, c, n, out); }, {&y.storage});
  }
  const InputRows in = make_input(testing::gaussian(4 * 256, 3), 4, 256, DType::f32, 256);
  OutputRows y = make_output(DType::f32, 4, 256, 256);
  expect_rejected("head_dim", [&] { rotate_rows(128, in.view, y.view); }, {&y.storage});
  TensorView half_input = in.view;
  half_input.dtype = DType::f16;
  expect_rejected("x", [&] { rotate_rows(256, half_input, y.view); }, {&y.storage});
  expect_rejected("y", [&] { rotate_rows(256, in.view, y.view.slice(0, 0, 3)); }, {&y.storage});
  // An output shifted by one row against its input overlaps it without being the same view.
  OutputRows shared = make_output(DType::f32, 5, 256, 256);
  const TensorView first_rows = shared.view.slice(0, 0, 4), later_rows = shared.view.slice(0, 1, 4);
  expect_rejected("y", [&] { rotate_rows(256, first_rows, later_rows); }, {&shared.storage});
  expect_rejected("x", [&] { unrotate_rows(256, first_rows, later_rows); }, {&shared.storage});
}

TEST(RowCodec, FormatNamesAndSizes) {
  for (RowFormat format : kRowFormats) EXPECT_EQ(parse_format(format_name(format)), format);
  expect_rejected("format", [] { parse_format("tq7"); }, {});
  // SPEC §1.5: bytes per row at D = 256, codes + side values.
  const std::pair<RowFormat, std::int64_t> stored_at_256[] = {
      {RowFormat::f16, 512}, {RowFormat::fp8, 260}, {RowFormat::tq3, 100}, {RowFormat::tq4, 132},
      {RowFormat::tq5, 164}, {RowFormat::tq6, 196}, {RowFormat::tq8, 260}};
  for (const auto& [format, bytes] : stored_at_256) {
    EXPECT_EQ(row_bytes(format, 256) + 4 * row_scales(format, 256), bytes) << format_name(format);
    EXPECT_EQ(row_bytes(format, 512), 2 * row_bytes(format, 256)) << format_name(format);
  }
  EXPECT_EQ(norms_per_row(256), 1);
  EXPECT_EQ(norms_per_row(512), 2);
  EXPECT_EQ(row_scales(RowFormat::tq3, 512), 2);
  EXPECT_EQ(row_scales(RowFormat::fp8, 512), 1);
  EXPECT_EQ(row_scales(RowFormat::f16, 512), 0);
  EXPECT_EQ(format_bits(RowFormat::tq6), 6);
  EXPECT_EQ(format_bits(RowFormat::tq3), 3);
  EXPECT_FALSE(is_quantized(RowFormat::f16));
  EXPECT_TRUE(is_quantized(RowFormat::fp8));
  EXPECT_FALSE(is_turboquant(RowFormat::fp8));
  EXPECT_TRUE(is_turboquant(RowFormat::tq3));
}

}  // namespace
}  // namespace turbodecode
