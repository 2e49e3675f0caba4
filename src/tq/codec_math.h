// Element-level arithmetic of the TurboQuant-HB codec (SPEC §1.1-1.2), shared verbatim by the
// CPU backend and the CUDA kernels so that both encoders round identically (SPEC §5). Every
// rounding step that decides a code lives here; a backend only chooses how to parallelise.
//
// Tables (codebooks, midpoints, sign mask) are host constexpr arrays: device code must not index
// them directly (nvcc compiles that to a trap). Kernels copy them once into __constant__ memory
// (e.g. `__constant__ float kMid[255]` initialised from kMidpoints8bit) and pass that pointer to
// the functions below, which therefore take their tables as arguments.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/host_device.h"
#include "tq/tables.h"

namespace turbodecode::tq {

// Rows with a norm at or below this encode as all-zero scaled values (SPEC §1.2).
inline constexpr float kZeroNormThreshold = 1e-10f;
// D = 256 maps the unit-norm row onto the codebook's N(0,1) scale: u = y · 16 / n.
inline constexpr float kD256CodebookScale = 16.0f;
// D = 512 keeps one RMS norm per half of this many elements.
inline constexpr int kD512HalfLength = 256;

// Midpoints (c_i + c_{i+1}) / 2 between neighbouring centroids, rounded once to f32. A code
// is the number of midpoints strictly below u, which makes ties go to the lower index.
template <std::size_t N>
constexpr std::array<float, N - 1> midpoints_of(const std::array<float, N>& centroids) {
  std::array<float, N - 1> mid{};
  for (std::size_t i = 0; i + 1 < N; ++i) mid[i] = (centroids[i] + centroids[i + 1]) * 0.5f;
  return mid;
}

inline constexpr std::array<float, 7> kMidpoints3bit = midpoints_of(kCodebook3bit);
inline constexpr std::array<float, 15> kMidpoints4bit = midpoints_of(kCodebook4bit);
inline constexpr std::array<float, 31> kMidpoints5bit = midpoints_of(kCodebook5bit);
inline constexpr std::array<float, 63> kMidpoints6bit = midpoints_of(kCodebook6bit);
inline constexpr std::array<float, 255> kMidpoints8bit = midpoints_of(kCodebook8bit);

// Count of entries of the ascending `midpoints` (2^bits − 1 of them) strictly below u, by a
// branch-free binary search. NaN compares false everywhere and yields code 0.
TD_HOST_DEVICE int code_of(float u, const float* midpoints, int bits) {
  int index = 0;
  for (int step = 1 << (bits - 1); step >= 1; step >>= 1) {
    if (midpoints[index + step - 1] < u) index += step;
  }
  return index;
}

// 1/√D applied after the unnormalised butterfly. 1/16 is exact; 1/√512 is rounded once.
TD_HOST_DEVICE constexpr float rotation_scale(int head_dim) {
  return head_dim == 256 ? 0.0625f : 0.0441941738241592203f;  // 1/sqrt(512)
}

// True when element j is negated by `sign_mask` (kSignMask or its device copy), LSB first.
TD_HOST_DEVICE bool sign_bit(const std::uint8_t* sign_mask, int j) {
  return (sign_mask[j >> 3] >> (j & 7)) & 1;
}

// Sign of element j applied before the forward transform (and after the inverse one).
TD_HOST_DEVICE float apply_sign(float value, bool flipped) {
  return flipped ? -value : value;
}

// One butterfly of the natural-order Walsh-Hadamard transform: the lower index keeps the sum.
// The transform runs stages with stride 1, 2, 4, ..., D/2 in that order; the rounding of the
// result depends on that order, so every backend must follow it.
TD_HOST_DEVICE void butterfly(float& low, float& high) {
  const float sum = low + high;
  const float difference = low - high;
  low = sum;
  high = difference;
}

// Sums of squares run in one canonical order so backends agree bit for bit: kNormLanes partial
// sums, partial l accumulating elements l, l + 32, l + 64, ... in ascending order through
// add_square, then a pairwise tree adding partial l + offset into partial l for offset = 16,
// 8, 4, 2, 1 (what a warp's xor-shuffle reduction computes).
inline constexpr int kNormLanes = 32;

// Accumulates y² into a partial sum with one fused multiply-add, so compilers that contract
// and those that do not round alike.
TD_HOST_DEVICE float add_square(float partial, float y) {
  return fmaf(y, y, partial);
}

// D = 256: the stored norm from the row's sum of squares, and the factor taking y to u.
TD_HOST_DEVICE float d256_norm(float sum_of_squares) {
  return sqrtf(sum_of_squares);
}
TD_HOST_DEVICE float d256_encode_scale(float norm) {
  return norm > kZeroNormThreshold ? kD256CodebookScale / norm : 0.0f;
}
TD_HOST_DEVICE float d256_decode_scale(float norm) {
  return norm / kD256CodebookScale;
}

// D = 512: the stored norm of one half (its RMS), and the factors taking y to u and back.
TD_HOST_DEVICE float d512_half_norm(float half_sum_of_squares) {
  return sqrtf(half_sum_of_squares / static_cast<float>(kD512HalfLength));
}
TD_HOST_DEVICE float d512_encode_scale(float half_norm, float scale_factor) {
  return half_norm > kZeroNormThreshold ? scale_factor / half_norm : 0.0f;
}
TD_HOST_DEVICE float d512_decode_scale(float half_norm, float scale_factor) {
  return half_norm / scale_factor;
}

// Code layout of a row (SPEC §1.2, §1.5): every TQ width stores its codes as one little-endian
// bit stream, code e at bits [b·e, b·e + b). That is the byte per code of 8 bits, the nibble
// pairs of 4 bits (even element low) and the little-endian groups of 3, 5 and 6 bits (8 codes in
// 3 or 5 bytes, 4 codes in 3 bytes) alike.
TD_HOST_DEVICE constexpr std::int64_t code_row_bytes(int bits, int head_dim) {
  return static_cast<std::int64_t>(bits) * head_dim / 8;
}

// Code of element e of a packed row. Reads only the bytes that hold it.
TD_HOST_DEVICE int read_code(const unsigned char* row, int bits, int e) {
  const int bit = bits * e;
  const unsigned char* at = row + (bit >> 3);
  unsigned window = at[0];
  if ((bit & 7) + bits > 8) window |= static_cast<unsigned>(at[1]) << 8;
  return static_cast<int>((window >> (bit & 7)) & ((1u << bits) - 1u));
}

// 4-bit rows: two codes per byte, the even element in the low nibble (the bit stream above).
TD_HOST_DEVICE unsigned char pack_nibbles(int even_code, int odd_code) {
  return static_cast<unsigned char>(even_code | (odd_code << 4));
}
TD_HOST_DEVICE int unpack_nibble(unsigned char byte, int element) {
  return (element & 1) ? (byte >> 4) : (byte & 0x0f);
}

// Writes code `code` (< 2^bits) of element e into a packed row whose bytes start zeroed or
// hold earlier codes of the row; bits of other elements are kept.
TD_HOST_DEVICE void write_code(unsigned char* row, int bits, int e, int code) {
  const int bit = bits * e;
  unsigned char* at = row + (bit >> 3);
  const unsigned mask = ((1u << bits) - 1u) << (bit & 7);
  const unsigned value = static_cast<unsigned>(code) << (bit & 7);
  at[0] = static_cast<unsigned char>((at[0] & ~mask) | (value & mask));
  if ((bit & 7) + bits > 8) {
    at[1] = static_cast<unsigned char>((at[1] & ~(mask >> 8)) | ((value & mask) >> 8));
  }
}

}  // namespace turbodecode::tq
