// The CPU backend of the Q8_0 matvec (compiled once per Highway target; matvec_cpu runs the
// best one the CPU supports) and the Q8_0 quantizer.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "q8/q8_cpu.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/f16.h"
#include "common/thread_pool.h"
#include "common/validate.h"
#include "hwy/highway.h"
#include "q8/q8_row_dot-inl.h"
#include "q8/validate_q8.h"
#include "turbodecode/q8.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::q8::HWY_NAMESPACE {
namespace {

// Output row r for the kTokens token rows from t0: one pass over the weight row.
template <int kTokens>
void matvec_tile(const MatvecArgs& args, std::int64_t r, std::int64_t t0) {
  float dots[kTokens];
  row_dots_cpu<kTokens>(args.weight + r * args.row_stride_bytes,
                        args.input + t0 * args.input_stride, args.input_stride, args.cols, dots);
  for (int i = 0; i < kTokens; ++i) args.out[(t0 + i) * args.out_stride + r] = dots[i];
}

template <int kTokens = kCpuTileTokens>
void matvec_tail(const MatvecArgs& args, std::int64_t r, std::int64_t t0, int tokens) {
  if constexpr (kTokens > 0) {
    if (tokens == kTokens) {
      matvec_tile<kTokens>(args, r, t0);
    } else {
      matvec_tail<kTokens - 1>(args, r, t0, tokens);
    }
  }
}

}  // namespace

// Items are (tile of up to kCpuTileTokens token rows, output row): a weight row is read once
// per tile, not once per token.
void matvec_cpu(const MatvecArgs& args) {
  const std::int64_t tiles = (args.tokens + kCpuTileTokens - 1) / kCpuTileTokens;
  parallel_for(tiles * args.out_rows, 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t t0 = i / args.out_rows * kCpuTileTokens;
      const std::int64_t r = i % args.out_rows;
      const std::int64_t left = args.tokens - t0;
      matvec_tail(args, r, t0, static_cast<int>(left < kCpuTileTokens ? left : kCpuTileTokens));
    }
  });
}

}  // namespace turbodecode::q8::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace turbodecode {
namespace q8 {

HWY_EXPORT(matvec_cpu);

void matvec_cpu(const MatvecArgs& args) {
  HWY_DYNAMIC_DISPATCH(matvec_cpu)(args);
}

}  // namespace q8

void quantize_q8_0(const TensorView& src, const TensorView& dst) {
  check_rows(src, "src", Device::cpu, DType::f32, {kAnyExtent, kAnyExtent});
  const std::int64_t rows = src.shape[0];
  const std::int64_t cols = src.shape[1];
  check_arg(
      cols > 0 && cols % kQ8BlockValues == 0, "src",
      "width must be a positive multiple of 32 (whole Q8_0 blocks), is " + std::to_string(cols));
  check_rows(dst, "dst", Device::cpu, DType::u8, {rows, q8_row_bytes(cols)});
  check_disjoint(src, "src", dst, "dst");
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = src.as<const float>() + r * src.strides[0];
    std::uint8_t* out = dst.as<std::uint8_t>() + r * dst.strides[0];
    for (std::int64_t b = 0; b < cols / kQ8BlockValues; ++b) {
      const float* xb = x + b * kQ8BlockValues;
      std::uint8_t* block = out + b * kQ8BlockBytes;
      float amax = 0.0f;
      for (int j = 0; j < kQ8BlockValues; ++j) amax = std::max(amax, std::fabs(xb[j]));
      const std::uint16_t d_bits = f32_to_f16(amax / 127.0f);
      std::memcpy(block, &d_bits, sizeof d_bits);
      const float d = f16_to_f32(d_bits);
      const float inv = d > 0.0f ? 1.0f / d : 0.0f;
      for (int j = 0; j < kQ8BlockValues; ++j) {
        const float q = std::clamp(std::nearbyint(xb[j] * inv), -127.0f, 127.0f);
        // NaN (a NaN weight, or an infinite one scaled by 1/inf) has no integer code: 0, with
        // the block's scale left to carry the Inf.
        block[2 + j] = std::isnan(q) ? 0 : static_cast<std::uint8_t>(static_cast<std::int8_t>(q));
      }
    }
  }
}

}  // namespace turbodecode
#endif  // HWY_ONCE
