#include "tq/codec_cpu.h"

#include <cstring>

#include "common/f16.h"
#include "common/thread_pool.h"
#include "tq/codec_math.h"
#include "tq/fp8_math.h"

namespace turbodecode::tq {

namespace {

constexpr int kMaxHeadDim = 512;
// Rows per parallel_for chunk: encoding a row takes a few µs.
constexpr std::int64_t kRowGrain = 16;

const float* midpoints(int bits) {
  switch (bits) {
    case 3:
      return kMidpoints3bit.data();
    case 4:
      return kMidpoints4bit.data();
    case 5:
      return kMidpoints5bit.data();
    case 6:
      return kMidpoints6bit.data();
    default:
      return kMidpoints8bit.data();
  }
}

// Eight consecutive butterflies between low[0..8) and high[0..8): one AVX vector each way.
void butterfly8(float* low, float* high) {
  float a[8], b[8];
  for (int k = 0; k < 8; ++k) {
    a[k] = low[k];
    b[k] = high[k];
  }
  for (int k = 0; k < 8; ++k) butterfly(a[k], b[k]);
  for (int k = 0; k < 8; ++k) {
    low[k] = a[k];
    high[k] = b[k];
  }
}

// Stages of stride 1, 2, 4, ..., D/2 in that order (codec_math.h). Stages below 8 stay inside
// each group of 8 elements, so running them group by group computes the same values while
// keeping the group in registers; wider stages run 8 lanes at a time.
void walsh_hadamard(int head_dim, float* row) {
  for (int group = 0; group < head_dim; group += 8) {
    float* g = row + group;
    for (int stride = 1; stride < 8; stride <<= 1) {
      for (int j = 0; j < 8; ++j) {
        if ((j & stride) == 0) butterfly(g[j], g[j + stride]);
      }
    }
  }
  for (int stride = 8; stride < head_dim; stride <<= 1) {
    for (int block = 0; block < head_dim; block += 2 * stride) {
      for (int j = block; j < block + stride; j += 8) butterfly8(row + j, row + j + stride);
    }
  }
}

// Canonical order of codec_math.h: kNormLanes strided partial sums, then a pairwise tree.
float sum_of_squares(const float* y, int count) {
  float lanes[kNormLanes] = {};
  for (int j = 0; j < count; j += kNormLanes) {
    for (int lane = 0; lane < kNormLanes; ++lane)
      lanes[lane] = add_square(lanes[lane], y[j + lane]);
  }
  for (int offset = kNormLanes / 2; offset >= 1; offset >>= 1) {
    for (int lane = 0; lane < offset; ++lane) lanes[lane] = lanes[lane] + lanes[lane + offset];
  }
  return lanes[0];
}

void quantize(const float* y, int count, float scale, int bits, int* codes) {
  const float* mid = midpoints(bits);
  for (int j = 0; j < count; ++j) codes[j] = code_of(y[j] * scale, mid, bits);
}

// Every bit of a row belongs to one code, so the row's previous bytes never show through.
void store_codes(const int* codes, int head_dim, int bits, std::uint8_t* out) {
  for (int j = 0; j < head_dim; ++j) write_code(out, bits, j, codes[j]);
}

// FP8 rows (SPEC §1.6): not rotated; the scale comes from the row's largest magnitude, which
// fmaxf takes ignoring NaN, so a NaN element spoils only its own code.
void encode_fp8_row(const float* x, int head_dim, std::uint8_t* codes, float* scale) {
  float amax = 0.0f;
  for (int j = 0; j < head_dim; ++j) amax = fmaxf(amax, fabsf(x[j]));
  *scale = fp8::row_scale(amax);
  for (int j = 0; j < head_dim; ++j) codes[j] = fp8::encode(x[j], *scale);
}

void decode_fp8_row(const std::uint8_t* codes, float scale, int head_dim, float* y) {
  for (int j = 0; j < head_dim; ++j) y[j] = scale * fp8::decode(codes[j]);
}

const std::uint8_t* row_u8(const TensorView& t, std::int64_t row) {
  return static_cast<const std::uint8_t*>(t.data) + row * t.strides[0];
}

const void* row_address(const TensorView& t, std::int64_t row) {
  return static_cast<const char*>(t.data) +
         row * t.strides[0] * static_cast<std::int64_t>(dtype_bytes(t.dtype));
}

}  // namespace

void load_row(const void* source, DType dtype, int count, float* destination) {
  if (dtype == DType::f32) {
    std::memcpy(destination, source, static_cast<std::size_t>(count) * sizeof(float));
    return;
  }
  const auto* half = static_cast<const std::uint16_t*>(source);
  if (dtype == DType::f16) {
    for (int j = 0; j < count; ++j) destination[j] = f16_to_f32(half[j]);
  } else {
    for (int j = 0; j < count; ++j) destination[j] = bf16_to_f32(half[j]);
  }
}

void rotate_row(int head_dim, float* row) {
  for (int j = 0; j < head_dim; ++j) row[j] = apply_sign(row[j], sign_bit(kSignMask.data(), j));
  walsh_hadamard(head_dim, row);
  const float scale = rotation_scale(head_dim);
  for (int j = 0; j < head_dim; ++j) row[j] *= scale;
}

void unrotate_row(int head_dim, float* row) {
  walsh_hadamard(head_dim, row);
  const float scale = rotation_scale(head_dim);
  for (int j = 0; j < head_dim; ++j)
    row[j] = apply_sign(row[j] * scale, sign_bit(kSignMask.data(), j));
}

void encode_row(const CodecParams& params, const void* x, DType dtype, std::uint8_t* codes,
                float* norms) {
  const int head_dim = params.head_dim;
  const int bits = format_bits(params.format);
  alignas(64) float y[kMaxHeadDim];
  int code_values[kMaxHeadDim];
  load_row(x, dtype, head_dim, y);
  if (params.format == RowFormat::fp8) return encode_fp8_row(y, head_dim, codes, norms);
  rotate_row(head_dim, y);
  if (head_dim == 256) {
    const float norm = d256_norm(sum_of_squares(y, head_dim));
    norms[0] = norm;
    quantize(y, head_dim, d256_encode_scale(norm), bits, code_values);
  } else {
    for (int half = 0; half < 2; ++half) {
      const int begin = half * kD512HalfLength;
      const float norm = d512_half_norm(sum_of_squares(y + begin, kD512HalfLength));
      norms[half] = norm;
      quantize(y + begin, kD512HalfLength, d512_encode_scale(norm, params.scale_factor_d512), bits,
               code_values + begin);
    }
  }
  store_codes(code_values, head_dim, bits, codes);
}

void decode_row(const CodecParams& params, const std::uint8_t* codes, const float* norms,
                float* y) {
  const int head_dim = params.head_dim;
  if (params.format == RowFormat::fp8) return decode_fp8_row(codes, norms[0], head_dim, y);
  const int bits = format_bits(params.format);
  const float* centroids = codebook(bits).data();
  float scales[2];
  if (head_dim == 256) {
    scales[0] = d256_decode_scale(norms[0]);
  } else {
    for (int half = 0; half < 2; ++half) {
      scales[half] = d512_decode_scale(norms[half], params.scale_factor_d512);
    }
  }
  for (int j = 0; j < head_dim; ++j) {
    y[j] = centroids[read_code(codes, bits, j)] * scales[j / kD512HalfLength];
  }
}

void encode_rows_cpu(const CodecParams& params, const TensorView& x, const TensorView& codes,
                     const TensorView& norms) {
  parallel_for(x.shape[0], kRowGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      encode_row(params, row_address(x, row), x.dtype,
                 static_cast<std::uint8_t*>(codes.data) + row * codes.strides[0],
                 norms.as<float>() + row * norms.strides[0]);
    }
  });
}

void decode_rows_cpu(const CodecParams& params, const TensorView& codes, const TensorView& norms,
                     const TensorView& y) {
  parallel_for(codes.shape[0], kRowGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      decode_row(params, row_u8(codes, row), norms.as<const float>() + row * norms.strides[0],
                 y.as<float>() + row * y.strides[0]);
    }
  });
}

void rotate_rows_cpu(int head_dim, bool inverse, const TensorView& in, const TensorView& out) {
  parallel_for(in.shape[0], kRowGrain, [&](std::int64_t begin, std::int64_t end) {
    alignas(64) float row[kMaxHeadDim];
    for (std::int64_t r = begin; r < end; ++r) {
      load_row(row_address(in, r), DType::f32, head_dim, row);
      if (inverse) {
        unrotate_row(head_dim, row);
      } else {
        rotate_row(head_dim, row);
      }
      std::memcpy(out.as<float>() + r * out.strides[0], row,
                  static_cast<std::size_t>(head_dim) * sizeof(float));
    }
  });
}

}  // namespace turbodecode::tq
