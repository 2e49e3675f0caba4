// Device copies of the TurboQuant-HB tables (tq/tables.h, tq/codec_math.h). The host constexpr
// arrays cannot be indexed from device code; these live in global memory rather than in
// __constant__ because lanes index them at different addresses, which the constant cache
// would serialise. Kernels stage what they search into shared memory: the codebook for decoding,
// a bucket table (code_buckets.h) built from the midpoints for encoding.
#pragma once

#include <array>
#include <cstdint>

#include "tq/codec_math.h"
#include "tq/cuda/code_buckets.h"

namespace turbodecode::cuda::tq_tables {

// Internal linkage: every translation unit that includes this header owns its copy, so no
// relocatable device code is needed.
static __device__ const std::array<float, 7> kMidpoints3 = tq::kMidpoints3bit;
static __device__ const std::array<float, 15> kMidpoints4 = tq::kMidpoints4bit;
static __device__ const std::array<float, 31> kMidpoints5 = tq::kMidpoints5bit;
static __device__ const std::array<float, 63> kMidpoints6 = tq::kMidpoints6bit;
static __device__ const std::array<float, 255> kMidpoints8 = tq::kMidpoints8bit;

static __device__ const std::array<float, 8> kCodebook3 = tq::kCodebook3bit;
static __device__ const std::array<float, 16> kCodebook4 = tq::kCodebook4bit;
static __device__ const std::array<float, 32> kCodebook5 = tq::kCodebook5bit;
static __device__ const std::array<float, 64> kCodebook6 = tq::kCodebook6bit;
static __device__ const std::array<float, 256> kCodebook8 = tq::kCodebook8bit;

static __device__ const std::array<std::uint8_t, 64> kSignMask = tq::kSignMask;

// The largest table: 2^8 centroids (the midpoints need one fewer).
inline constexpr int kMaxTableEntries = 256;

__device__ __forceinline__ const float* midpoints(int bits) {
  switch (bits) {
    case 3:
      return kMidpoints3.data();
    case 4:
      return kMidpoints4.data();
    case 5:
      return kMidpoints5.data();
    case 6:
      return kMidpoints6.data();
    default:
      return kMidpoints8.data();
  }
}

__device__ __forceinline__ const float* codebook(int bits) {
  switch (bits) {
    case 3:
      return kCodebook3.data();
    case 4:
      return kCodebook4.data();
    case 5:
      return kCodebook5.data();
    case 6:
      return kCodebook6.data();
    default:
      return kCodebook8.data();
  }
}

// Copies `count` entries of `table` into `staged` with every thread of the block, then a block
// barrier. Tables are tiny; reading them from shared memory avoids divergent global loads.
__device__ __forceinline__ void stage_in_block(const float* table, int count, float* staged) {
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) {
    staged[i] = table[i];
  }
  __syncthreads();
}

// Fills the bucket table of `bits`-bit codes (code_buckets.h) with the threads of the block, a
// code each. No barrier: the caller syncs once after all its tables.
__device__ __forceinline__ void fill_code_buckets(int bits, code_buckets::CodeBucket* table) {
  for (int code = static_cast<int>(threadIdx.x); code < (1 << bits);
       code += static_cast<int>(blockDim.x)) {
    code_buckets::fill_buckets_of_code(code, midpoints(bits), bits, table);
  }
}

}  // namespace turbodecode::cuda::tq_tables
