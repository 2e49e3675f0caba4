// Code search by uniform buckets, for the CUDA encoders. A code is the count of midpoints
// strictly below u (tq::code_of); a binary search over 255 midpoints costs eight dependent
// shared-memory loads per element, which bounds the encoders. Instead the u axis is cut into
// buckets narrower than half the smallest midpoint gap, so a bucket holds at most one midpoint,
// and each bucket stores the count of midpoints in earlier buckets (its first code) with the
// midpoint that may follow inside it: code = first_code + (boundary < u), one lookup per element.
//
// Exact for every float, NaN and ±∞ included, because the bucket of u is a monotone function
// of u (a subtraction, a multiplication, a clamp and a rounding, each monotone), computed by
// the same code when the table is built and when it is read: midpoints in earlier buckets are
// below u, those in later buckets above it, and the one in u's bucket is compared.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>

#include "common/host_device.h"
#include "tq/codec_math.h"

namespace turbodecode::cuda::code_buckets {

// bucket(u) = round(clamp((u − origin) · per_unit, 0, count − 1)).
struct BucketGrid {
  float origin;
  float per_unit;
  int count;
};

// 8-byte aligned so a lookup is one shared-memory load.
struct alignas(8) CodeBucket {
  float boundary;  // the midpoint inside this bucket, or the first one after it (+∞ past the end)
  int first_code;  // midpoints in earlier buckets
};

// Two buckets per smallest midpoint gap, so rounding can never put two midpoints in one
// bucket; two spare buckets below the first midpoint and above the last keep the clamped
// edges free of midpoints.
template <std::size_t N>
constexpr BucketGrid grid_of(const std::array<float, N>& midpoints) {
  double smallest_gap = static_cast<double>(midpoints[1]) - midpoints[0];
  for (std::size_t i = 2; i < N; ++i) {
    const double gap = static_cast<double>(midpoints[i]) - midpoints[i - 1];
    if (gap < smallest_gap) smallest_gap = gap;
  }
  const double width = smallest_gap / 2.0;
  const double origin = midpoints[0] - 2.0 * width;
  const double span = (static_cast<double>(midpoints[N - 1]) - origin) / width;
  return {static_cast<float>(origin), static_cast<float>(1.0 / width), static_cast<int>(span) + 3};
}

inline constexpr BucketGrid kGrid3 = grid_of(tq::kMidpoints3bit);
inline constexpr BucketGrid kGrid4 = grid_of(tq::kMidpoints4bit);
inline constexpr BucketGrid kGrid5 = grid_of(tq::kMidpoints5bit);
inline constexpr BucketGrid kGrid6 = grid_of(tq::kMidpoints6bit);
inline constexpr BucketGrid kGrid8 = grid_of(tq::kMidpoints8bit);

// The largest table (8-bit codes); smaller ones use a prefix of the same storage.
inline constexpr int kMaxBuckets = kGrid8.count;

TD_HOST_DEVICE BucketGrid grid_for_bits(int bits) {
  switch (bits) {
    case 3:
      return kGrid3;
    case 4:
      return kGrid4;
    case 5:
      return kGrid5;
    case 6:
      return kGrid6;
    default:
      return kGrid8;
  }
}

TD_HOST_DEVICE int float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_int(x);
#else
  return std::bit_cast<int>(x);
#endif
}

// Adding 2^23 to a float in [0, 2^22) leaves its nearest integer in the low mantissa bits: one
// addition instead of a float-to-int conversion, which issues at a quarter of the rate on the
// GPU. fmaxf sends NaN to bucket 0, where the boundary comparison fails and the code is 0, as
// code_of gives.
inline constexpr float kRoundingBias = 8388608.0f;  // 2^23

TD_HOST_DEVICE int bucket_of(float u, const BucketGrid& grid) {
  const float position = (u - grid.origin) * grid.per_unit;
  const float clamped = fminf(fmaxf(position, 0.0f), static_cast<float>(grid.count - 1));
  return float_bits(clamped + kRoundingBias) - float_bits(kRoundingBias);
}

// Fills the buckets whose first code is `code` (0 ≤ code ≤ 2^bits − 1): those after the
// bucket of midpoint code − 1, up to and including the bucket of midpoint `code` (the last
// bucket for the code past every midpoint). Calling it for every code fills each bucket once.
TD_HOST_DEVICE void fill_buckets_of_code(int code, const float* midpoints, int bits,
                                         CodeBucket* table) {
  const BucketGrid grid = grid_for_bits(bits);
  const int midpoint_count = (1 << bits) - 1;
  const int first = code == 0 ? 0 : bucket_of(midpoints[code - 1], grid) + 1;
  const bool past_end = code == midpoint_count;
  const int last = past_end ? grid.count - 1 : bucket_of(midpoints[code], grid);
  const float boundary = past_end ? INFINITY : midpoints[code];
  for (int b = first; b <= last; ++b) table[b] = {boundary, code};
}

TD_HOST_DEVICE int code_in_buckets(float u, const CodeBucket* table, const BucketGrid& grid) {
  const CodeBucket bucket = table[bucket_of(u, grid)];
  return bucket.first_code + (bucket.boundary < u ? 1 : 0);
}

}  // namespace turbodecode::cuda::code_buckets
