// TurboQuant-HB codec, CPU backend, against the double-precision oracle (SPEC §1.1-1.2, §5, §7).
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
#include "common/f16.h"
#include "reference/tq_oracle.h"
#include "test_support.h"
#include "tq/tables.h"
#include "turbodecode/buffer.h"
#include "turbodecode/error.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode {
namespace {

constexpr RowFormat kQuantizedFormats[] = {RowFormat::tq4, RowFormat::tq5, RowFormat::tq6,
                                           RowFormat::tq8};
constexpr int kHeadDims[] = {256, 512};
// u may land on the other side of a decision boundary when f32 and double rotations disagree
// by rounding (oracle::kTqBoundaryTolerance); as in SPEC §5, at most 0.1% of codes may.
constexpr double kMaxBoundaryMismatchFraction = 1e-3;

// N(0,1) rows, optionally with a few channels 30× larger in every row (outlier channels).
std::vector<float> test_rows(std::int64_t rows, int head_dim, bool outliers, std::uint64_t seed) {
  std::vector<float> x = testing::gaussian(static_cast<std::size_t>(rows * head_dim), seed);
  if (!outliers) return x;
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<int> channel(0, head_dim - 1);
  for (int k = 0; k < 6; ++k) {
    const int c = channel(rng);
    for (std::int64_t r = 0; r < rows; ++r)
      x[r * head_dim + c] = 30.0f + 10.0f * x[r * head_dim + c];
  }
  return x;
}

// Rows of `head_dim` values stored in `dtype` with a row stride of `row_stride` elements,
// plus the values the library sees after widening (what the oracle must be given).
struct InputRows {
  Buffer storage;
  TensorView view;
  std::vector<double> widened;  // rows × head_dim, row-major
};

InputRows make_input(const std::vector<float>& values, std::int64_t rows, int head_dim, DType dtype,
                     std::int64_t row_stride) {
  InputRows in;
  const std::int64_t element_bytes = static_cast<std::int64_t>(dtype_bytes(dtype));
  in.storage = Buffer(Device::cpu, std::max<std::int64_t>(1, rows * row_stride * element_bytes));
  in.storage.fill_bytes(0xFF);
  in.view = TensorView::contiguous(in.storage.data(), dtype, {rows, head_dim});
  in.view.strides[0] = row_stride;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < head_dim; ++j) {
      const float v = values[r * head_dim + j];
      const std::int64_t at = r * row_stride + j;
      if (dtype == DType::f32) {
        in.view.as<float>()[at] = v;
        in.widened.push_back(v);
      } else {
        const std::uint16_t bits = dtype == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
        in.view.as<std::uint16_t>()[at] = bits;
        in.widened.push_back(dtype == DType::f16 ? f16_to_f32(bits) : bf16_to_f32(bits));
      }
    }
  }
  return in;
}

// A poisoned output of `rows` rows of `width` elements with a row stride of `row_stride`.
struct OutputRows {
  Buffer storage;
  TensorView view;
};

OutputRows make_output(DType dtype, std::int64_t rows, std::int64_t width,
                       std::int64_t row_stride) {
  OutputRows out;
  out.storage = Buffer(
      Device::cpu, std::max<std::int64_t>(1, rows * row_stride * std::int64_t(dtype_bytes(dtype))));
  out.storage.fill_bytes(0xFF);
  out.view = TensorView::contiguous(out.storage.data(), dtype, {rows, width});
  out.view.strides[0] = row_stride;
  return out;
}

bool all_bytes_are(const Buffer& buffer, std::uint8_t value) {
  const auto* bytes = static_cast<const std::uint8_t*>(buffer.data());
  for (std::int64_t i = 0; i < buffer.bytes(); ++i) {
    if (bytes[i] != value) return false;
  }
  return true;
}

// Bytes of the output buffer outside the view's rows (row padding) keep their poison.
void expect_padding_untouched(const OutputRows& out) {
  const auto* bytes = static_cast<const std::uint8_t*>(out.storage.data());
  const std::int64_t element = static_cast<std::int64_t>(dtype_bytes(out.view.dtype));
  for (std::int64_t r = 0; r < out.view.shape[0]; ++r) {
    for (std::int64_t e = out.view.shape[1]; e < out.view.strides[0]; ++e) {
      for (std::int64_t b = 0; b < element; ++b) {
        ASSERT_EQ(bytes[(r * out.view.strides[0] + e) * element + b], 0xFF) << "row " << r;
      }
    }
  }
}

std::vector<double> row_of(const std::vector<double>& all, std::int64_t r, int head_dim) {
  return {all.begin() + r * head_dim, all.begin() + (r + 1) * head_dim};
}

struct Encoded {
  OutputRows codes, norms;
};

Encoded encode_with_library(const CodecParams& params, const TensorView& x, std::int64_t pad) {
  const std::int64_t rows = x.shape[0];
  const std::int64_t code_bytes = row_bytes(params.format, params.head_dim);
  const int npp = norms_per_row(params.head_dim);
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

TEST(TqCodec, RoundTripCosineMeetsSpec) {
  const std::int64_t rows = 128;
  for (int d : kHeadDims) {
    for (RowFormat format : kQuantizedFormats) {
      for (bool outliers : {false, true}) {
        const std::uint64_t seed = testing::fresh_seed();
        SCOPED_TRACE("seed " + std::to_string(seed));
        const std::vector<float> x = test_rows(rows, d, outliers, seed);
        const InputRows in = make_input(x, rows, d, DType::f32, d);
        const CodecParams params{d, format, 1.0f};
        const Encoded e = encode_with_library(params, in.view, 0);
        OutputRows y = make_output(DType::f32, rows, d, d);
        decode_rows(params, e.codes.view, e.norms.view, y.view);
        unrotate_rows(d, y.view, y.view);
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
    for (RowFormat format : kQuantizedFormats) {
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
    for (RowFormat format : kQuantizedFormats) {
      const std::uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed));
      std::mt19937_64 rng(seed);
      const int bits = format_bits(format), npp = norms_per_row(d);
      const float scale_factor = d == 512 ? 0.8f : 1.0f;
      const std::int64_t code_bytes = row_bytes(format, d);
      OutputRows codes = make_output(DType::u8, rows, code_bytes, code_bytes);
      OutputRows norms = make_output(DType::f32, rows, npp, npp);
      std::uniform_int_distribution<int> byte(0, bits == 4 ? 255 : (1 << bits) - 1);
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
    for (RowFormat format : kQuantizedFormats) {
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

// Codes chosen up front come back packed two per byte, the even element in the low nibble.
// D = 512 with scale_factor_d512 = n_b makes u equal the rotated values themselves.
TEST(TqCodec, FourBitCodesPackEvenElementLow) {
  const int d = 512;
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Both halves hold every code 16 times (so the same RMS n_b), in random order.
  std::vector<int> chosen(d);
  for (int j = 0; j < d; ++j) chosen[j] = j % 16;
  std::shuffle(chosen.begin(), chosen.begin() + 256, rng);
  std::shuffle(chosen.begin() + 256, chosen.end(), rng);
  std::vector<double> y(d);
  double half_squares = 0.0;
  for (int j = 0; j < d; ++j) {
    y[j] = tq::kCodebook4bit[chosen[j]];
    if (j < 256) half_squares += y[j] * y[j];
  }
  const float rms = static_cast<float>(std::sqrt(half_squares / 256.0));
  const std::vector<double> x = oracle::tq_unrotate(d, y);
  const InputRows in = make_input(std::vector<float>(x.begin(), x.end()), 1, d, DType::f32, d);
  const CodecParams params{d, RowFormat::tq4, rms};
  const Encoded e = encode_with_library(params, in.view, 0);
  const auto* bytes = e.codes.view.as<std::uint8_t>();
  for (int j = 0; j < d; j += 2) {
    ASSERT_EQ(bytes[j / 2], chosen[j] | (chosen[j + 1] << 4)) << "byte " << j / 2;
  }
  expect_matches_oracle(params, in, e);
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

TEST(TqCodec, FormatNamesAndSizes) {
  for (RowFormat format :
       {RowFormat::f16, RowFormat::tq4, RowFormat::tq5, RowFormat::tq6, RowFormat::tq8}) {
    EXPECT_EQ(parse_format(format_name(format)), format);
  }
  expect_rejected("format", [] { parse_format("tq3"); }, {});
  EXPECT_EQ(row_bytes(RowFormat::f16, 256), 512);
  EXPECT_EQ(row_bytes(RowFormat::tq4, 512), 256);
  EXPECT_EQ(row_bytes(RowFormat::tq5, 256), 256);
  EXPECT_EQ(norms_per_row(256), 1);
  EXPECT_EQ(norms_per_row(512), 2);
  EXPECT_EQ(format_bits(RowFormat::tq6), 6);
  EXPECT_FALSE(is_quantized(RowFormat::f16));
  EXPECT_TRUE(is_quantized(RowFormat::tq4));
}

}  // namespace
}  // namespace turbodecode
