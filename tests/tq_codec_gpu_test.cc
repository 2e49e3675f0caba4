// Row codec (TurboQuant-HB and FP8 rows), CUDA backend, against the CPU backend (SPEC §5): TQ
// codes and norms agree within the allowance, FP8 codes and scales exactly, decode and rotation
// agree bitwise, every output element is written (outputs are poisoned first) and nothing
// between rows is touched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "codec_agreement.h"
#include "common/f16.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode {
namespace {

constexpr RowFormat kFormats[] = {RowFormat::fp8, RowFormat::tq3, RowFormat::tq4,
                                  RowFormat::tq5, RowFormat::tq6, RowFormat::tq8};
constexpr int kHeadDims[] = {256, 512};
constexpr DType kInputTypes[] = {DType::f32, DType::f16, DType::bf16};
// Not a multiple of the kernels' rows per block, so partial blocks are exercised.
constexpr std::int64_t kRows = 203;
constexpr std::uint8_t kPoisons[] = {0xFF, 0x5A};

// packed: contiguous rows (16-byte vector path). padded: odd row strides (byte path), with
// the gaps between rows checked to stay untouched.
enum class Layout { packed, padded };

struct RowStrides {
  std::int64_t x, codes, norms;
};

RowStrides strides_for(Layout layout, const CodecParams& p) {
  const std::int64_t bytes = row_bytes(p.format, p.head_dim);
  const int scales = row_scales(p.format, p.head_dim);
  if (layout == Layout::packed) return {p.head_dim, bytes, scales};
  return {p.head_dim + 3, bytes + 5, scales + 1};
}

// Gaussian rows plus the cases both backends must treat alike: outlier channels, an all-zero
// row, a row whose norm is under the zero threshold, and rows holding NaN or infinity.
std::vector<float> mixed_rows(std::int64_t rows, int head_dim, std::uint64_t seed) {
  std::vector<float> x = testing::gaussian(static_cast<std::size_t>(rows * head_dim), seed);
  for (std::int64_t r = 0; r < rows; ++r) x[r * head_dim + 7] = 40.0f + x[r * head_dim + 7];
  std::fill_n(x.begin() + 1 * head_dim, head_dim, 0.0f);
  std::fill_n(x.begin() + 2 * head_dim, head_dim, 1e-13f);
  x[3 * head_dim + 5] = std::numeric_limits<float>::quiet_NaN();
  x[4 * head_dim + 9] = std::numeric_limits<float>::infinity();
  return x;
}

// A rows × cols matrix of `dtype` with a row stride of `row_stride` elements, every byte (the
// gaps between rows too) set to `fill`.
struct Matrix {
  Buffer buffer;
  TensorView view;
};

Matrix make_matrix(Device device, DType dtype, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_stride, std::uint8_t fill) {
  Matrix m;
  m.buffer = Buffer(device, rows * row_stride * static_cast<std::int64_t>(dtype_bytes(dtype)));
  m.buffer.fill_bytes(fill);
  m.view = TensorView::contiguous(m.buffer.data(), dtype, {rows, cols}, device);
  m.view.strides[0] = row_stride;
  return m;
}

std::vector<std::uint8_t> bytes_of(const Matrix& m) {
  return testing::to_host<std::uint8_t>(m.buffer);
}

// `values` (rows × cols, row-major) stored as `dtype` with a row stride of `row_stride`.
std::vector<std::uint8_t> stored_values(const std::vector<float>& values, std::int64_t cols,
                                        DType dtype, std::int64_t row_stride) {
  const auto element = static_cast<std::int64_t>(dtype_bytes(dtype));
  const auto rows = static_cast<std::int64_t>(values.size()) / cols;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * row_stride * element), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const float v = values[r * cols + j];
      std::uint8_t* at = bytes.data() + (r * row_stride + j) * element;
      if (dtype == DType::f32) {
        std::memcpy(at, &v, sizeof v);
      } else {
        const std::uint16_t half = dtype == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(at, &half, sizeof half);
      }
    }
  }
  return bytes;
}

Matrix matrix_with(Device device, DType dtype, std::int64_t cols, std::int64_t row_stride,
                   const std::vector<std::uint8_t>& bytes) {
  const auto element = static_cast<std::int64_t>(dtype_bytes(dtype));
  const std::int64_t rows = static_cast<std::int64_t>(bytes.size()) / (row_stride * element);
  Matrix m = make_matrix(device, dtype, rows, cols, row_stride, 0);
  m.buffer.copy_from_host(bytes.data(), static_cast<std::int64_t>(bytes.size()));
  return m;
}

// Equal bit patterns, or both NaN (NaN payloads differ between CPU and GPU arithmetic).
bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Compares the first `used` elements of each row of two f32 matrices (same shape and stride)
// with same_float, and expects the rest of each row stride to still hold `poison`.
void expect_same_rows(const std::vector<std::uint8_t>& cpu, const std::vector<std::uint8_t>& gpu,
                      std::int64_t row_stride, std::int64_t used, std::uint8_t poison) {
  ASSERT_EQ(cpu.size(), gpu.size());
  const std::int64_t rows = static_cast<std::int64_t>(gpu.size()) / (row_stride * 4);
  std::int64_t mismatches = 0, gap_writes = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < row_stride; ++j) {
      const std::size_t at = static_cast<std::size_t>((r * row_stride + j) * 4);
      float a, b;
      std::memcpy(&a, cpu.data() + at, 4);
      std::memcpy(&b, gpu.data() + at, 4);
      if (j < used) {
        mismatches += same_float(a, b) ? 0 : 1;
      } else {
        gap_writes += std::count_if(gpu.begin() + static_cast<std::ptrdiff_t>(at),
                                    gpu.begin() + static_cast<std::ptrdiff_t>(at + 4),
                                    [&](std::uint8_t byte) { return byte != poison; });
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << "elements differing from the CPU backend";
  EXPECT_EQ(gap_writes, 0) << "bytes written between rows";
}

class CodecGpuTest : public ::testing::TestWithParam<std::tuple<int, RowFormat, DType, Layout>> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
  CodecParams params() const { return {std::get<0>(GetParam()), std::get<1>(GetParam()), 1.0f}; }
  DType input_type() const { return std::get<2>(GetParam()); }
  Layout layout() const { return std::get<3>(GetParam()); }

  // The case's input rows (drawn from `seed`) and their CPU encoding, the reference the CUDA
  // backend is held to.
  struct CpuEncoding {
    RowStrides s;
    std::int64_t code_bytes = 0;
    int npp = 0;
    std::vector<std::uint8_t> x_bytes;
    Matrix x, codes, norms;
  };
  CpuEncoding encode_on_cpu(std::uint64_t seed) const {
    const CodecParams p = params();
    CpuEncoding e;
    e.s = strides_for(layout(), p);
    e.code_bytes = row_bytes(p.format, p.head_dim);
    e.npp = row_scales(p.format, p.head_dim);
    e.x_bytes = stored_values(mixed_rows(kRows, p.head_dim, seed), p.head_dim, input_type(), e.s.x);
    e.x = matrix_with(Device::cpu, input_type(), p.head_dim, e.s.x, e.x_bytes);
    e.codes = make_matrix(Device::cpu, DType::u8, kRows, e.code_bytes, e.s.codes, 0);
    e.norms = make_matrix(Device::cpu, DType::f32, kRows, e.npp, e.s.norms, 0);
    encode_rows(p, e.x.view, e.codes.view, e.norms.view);
    return e;
  }
};

TEST_P(CodecGpuTest, EncodeAgreesWithCpu) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const CodecParams p = params();
  const CpuEncoding cpu = encode_on_cpu(seed);
  const RowStrides& s = cpu.s;
  const std::int64_t code_bytes = cpu.code_bytes;
  const int npp = cpu.npp;
  const auto cpu_codes = bytes_of(cpu.codes);
  const auto cpu_norms = bytes_of(cpu.norms);

  Matrix x_gpu = matrix_with(Device::cuda, input_type(), p.head_dim, s.x, cpu.x_bytes);
  for (std::uint8_t poison : kPoisons) {
    SCOPED_TRACE("poison " + std::to_string(poison));
    Matrix codes = make_matrix(Device::cuda, DType::u8, kRows, code_bytes, s.codes, poison);
    Matrix norms = make_matrix(Device::cuda, DType::f32, kRows, npp, s.norms, poison);
    encode_rows(p, x_gpu.view, codes.view, norms.view);
    synchronize();
    const auto gpu_codes = bytes_of(codes);
    testing::CodeAgreement agreement;
    std::int64_t gap_writes = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
      const std::uint8_t* row = gpu_codes.data() + r * s.codes;
      testing::compare_code_row(cpu_codes.data() + r * s.codes, row, code_bytes, p.format,
                                agreement);
      gap_writes += std::count_if(row + code_bytes, row + s.codes,
                                  [&](std::uint8_t byte) { return byte != poison; });
    }
    EXPECT_TRUE(agreement.within_spec()) << agreement.describe();
    EXPECT_EQ(gap_writes, 0) << "code bytes written between rows";
    expect_same_rows(cpu_norms, bytes_of(norms), s.norms, npp, poison);
  }
}

TEST_P(CodecGpuTest, DecodeMatchesCpuBitwise) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const CodecParams p = params();
  const CpuEncoding cpu = encode_on_cpu(seed);
  const RowStrides& s = cpu.s;
  Matrix y_cpu = make_matrix(Device::cpu, DType::f32, kRows, p.head_dim, s.x, 0xFF);
  decode_rows(p, cpu.codes.view, cpu.norms.view, y_cpu.view);

  Matrix codes = matrix_with(Device::cuda, DType::u8, cpu.code_bytes, s.codes, bytes_of(cpu.codes));
  Matrix norms = matrix_with(Device::cuda, DType::f32, cpu.npp, s.norms, bytes_of(cpu.norms));
  Matrix y = make_matrix(Device::cuda, DType::f32, kRows, p.head_dim, s.x, 0xFF);
  decode_rows(p, codes.view, norms.view, y.view);
  synchronize();
  expect_same_rows(bytes_of(y_cpu), bytes_of(y), s.x, p.head_dim, 0xFF);
}

std::string case_name(
    const ::testing::TestParamInfo<std::tuple<int, RowFormat, DType, Layout>>& info) {
  const auto [head_dim, format, dtype, layout] = info.param;
  std::string name = "D";
  name += std::to_string(head_dim);
  for (const char* part : {"_", format_name(format), "_", dtype_name(dtype),
                           layout == Layout::packed ? "_packed" : "_padded"}) {
    name += part;
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, CodecGpuTest,
                         ::testing::Combine(::testing::ValuesIn(kHeadDims),
                                            ::testing::ValuesIn(kFormats),
                                            ::testing::ValuesIn(kInputTypes),
                                            ::testing::Values(Layout::packed, Layout::padded)),
                         case_name);

// Rotation has no format or input type: its own suite over head dims and layouts.
class RotationGpuTest : public ::testing::TestWithParam<std::tuple<int, Layout>> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(RotationGpuTest, MatchesCpuBitwise) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto [d, layout] = GetParam();
  const std::int64_t stride = strides_for(layout, CodecParams{d, RowFormat::tq8, 1.0f}).x;
  const auto x_bytes = stored_values(mixed_rows(kRows, d, seed), d, DType::f32, stride);
  for (bool inverse : {false, true}) {
    for (bool in_place : {false, true}) {
      std::string label = inverse ? "inverse" : "forward";
      if (in_place) label += ", in place";
      SCOPED_TRACE(label);
      Matrix in_cpu = matrix_with(Device::cpu, DType::f32, d, stride, x_bytes);
      Matrix out_cpu = make_matrix(Device::cpu, DType::f32, kRows, d, stride, 0xFF);
      Matrix in = matrix_with(Device::cuda, DType::f32, d, stride, x_bytes);
      Matrix out = make_matrix(Device::cuda, DType::f32, kRows, d, stride, 0xFF);
      const TensorView& target = in_place ? in.view : out.view;
      if (inverse) {
        unrotate_rows(d, in_cpu.view, out_cpu.view);
        unrotate_rows(d, in.view, target);
      } else {
        rotate_rows(d, in_cpu.view, out_cpu.view);
        rotate_rows(d, in.view, target);
      }
      synchronize();
      // In place, the gaps hold the input's zero padding instead of the poison.
      expect_same_rows(bytes_of(out_cpu), bytes_of(in_place ? in : out), stride, d,
                       in_place ? 0 : 0xFF);
    }
  }
}

std::string rotation_case_name(const ::testing::TestParamInfo<std::tuple<int, Layout>>& tested) {
  const int head_dim = std::get<0>(tested.param);
  const bool packed = std::get<1>(tested.param) == Layout::packed;
  std::string name = "D";
  name += std::to_string(head_dim);
  name += packed ? "_packed" : "_padded";
  return name;
}

INSTANTIATE_TEST_SUITE_P(HeadDimsAndLayouts, RotationGpuTest,
                         ::testing::Combine(::testing::ValuesIn(kHeadDims),
                                            ::testing::Values(Layout::packed, Layout::padded)),
                         rotation_case_name);

// encode → decode (→ unrotate for TQ) entirely on the GPU recovers N(0,1) rows (SPEC §1.2
// quality; FP8 measured the same way).
TEST(CodecGpuRoundTrip, MeetsSpecCosine) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  constexpr std::int64_t rows = 64;
  for (int d : kHeadDims) {
    const std::vector<float> x = testing::gaussian(static_cast<std::size_t>(rows * d), seed);
    for (RowFormat format : kFormats) {
      SCOPED_TRACE(std::string(format_name(format)) + " D" + std::to_string(d));
      const CodecParams p{d, format, 1.0f};
      Matrix in = matrix_with(Device::cuda, DType::f32, d, d, stored_values(x, d, DType::f32, d));
      Matrix codes = make_matrix(Device::cuda, DType::u8, rows, row_bytes(format, d),
                                 row_bytes(format, d), 0xFF);
      const int scales = row_scales(format, d);
      Matrix norms = make_matrix(Device::cuda, DType::f32, rows, scales, scales, 0xFF);
      Matrix y = make_matrix(Device::cuda, DType::f32, rows, d, d, 0xFF);
      encode_rows(p, in.view, codes.view, norms.view);
      decode_rows(p, codes.view, norms.view, y.view);
      if (is_turboquant(format)) unrotate_rows(d, y.view, y.view);
      const auto decoded = testing::to_host<float>(y.buffer);
      double cosine_sum = 0.0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto first = static_cast<std::ptrdiff_t>(r * d);
        const std::vector<float> got(decoded.begin() + first, decoded.begin() + first + d);
        const std::vector<double> want(x.begin() + first, x.begin() + first + d);
        cosine_sum += testing::cosine(got, want);
      }
      EXPECT_GE(cosine_sum / rows, testing::min_round_trip_cosine(format));
    }
  }
}

// A small run of every codec kernel, for compute-sanitizer's racecheck and synccheck (named
// *Sanitizer* so run_gpu.sh can select it).
TEST(CodecGpuSanitizer, EveryKernelOnFewRows) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  constexpr std::int64_t rows = 6;
  for (int d : kHeadDims) {
    for (RowFormat format : {RowFormat::fp8, RowFormat::tq4, RowFormat::tq5, RowFormat::tq8}) {
      const CodecParams p{d, format, 1.0f};
      const auto x = stored_values(testing::gaussian(rows * d, 7), d, DType::f32, d);
      Matrix in = matrix_with(Device::cuda, DType::f32, d, d, x);
      Matrix codes =
          make_matrix(Device::cuda, DType::u8, rows, row_bytes(format, d), row_bytes(format, d), 0);
      const int scales = row_scales(format, d);
      Matrix norms = make_matrix(Device::cuda, DType::f32, rows, scales, scales, 0);
      encode_rows(p, in.view, codes.view, norms.view);
      decode_rows(p, codes.view, norms.view, in.view);
      rotate_rows(d, in.view, in.view);
      unrotate_rows(d, in.view, in.view);
      synchronize();
      const auto out = testing::to_host<float>(in.buffer);
      EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return std::isfinite(v); }));
    }
  }
}

}  // namespace
}  // namespace turbodecode
