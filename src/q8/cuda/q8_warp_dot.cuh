// One warp's dot products of a Q8_0 row with a tile of f32 input rows. The matvec kernel and the
// HC expand fusions share it, so fused and unfused results are bitwise equal.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "turbodecode/q8.h"

namespace turbodecode::cuda {

inline constexpr int kWarpSize = 32;

// Sums over the warp with a butterfly: every lane ends with the same, order-fixed total.
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// A row is read in spans of kQ8SpanBlocks blocks (2176 bytes: a whole row of 2048 weights),
// copied to the warp's shared staging buffer with 16-byte loads, all in flight together, and
// used from there for every token of the tile: the 34-byte blocks are not 16-byte aligned, so
// direct loads would be 2-byte ones.
inline constexpr int kQ8SpanBlocks = 64;
inline constexpr int kQ8SpanBytes = kQ8SpanBlocks * kQ8BlockBytes;
inline constexpr int kQ8TileTokens = 8;  // input rows per weight-row read (T > 1)

// The staging buffer keeps the span at the span's own offset modulo 16, so global and shared
// 16-byte boundaries coincide.
struct alignas(16) Q8Stage {
  std::uint8_t bytes[kQ8SpanBytes + 16];
};

// Copies `bytes` bytes (even, ≤ kQ8SpanBytes) from the 2-byte aligned `src` into `stage`; returns
// where the copy starts. The unaligned head and tail move as 2-byte words. Ends with __syncwarp.
__device__ __forceinline__ const std::uint8_t* stage_span(const std::uint8_t* src, int bytes,
                                                          Q8Stage& stage) {
  constexpr int kVectorsPerLane = (kQ8SpanBytes / 16 + kWarpSize - 1) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int misalign = static_cast<int>(reinterpret_cast<std::uintptr_t>(src) % 16);
  std::uint8_t* dst = stage.bytes + misalign;
  const int lead = min(bytes, (16 - misalign) % 16);  // bytes before the first 16-byte boundary
  const int vectors = (bytes - lead) / 16;
  const int tail = lead + 16 * vectors;
  uint4 v[kVectorsPerLane];
#pragma unroll
  for (int s = 0; s < kVectorsPerLane; ++s) {
    const int i = lane + kWarpSize * s;
    if (i < vectors) v[s] = __ldg(reinterpret_cast<const uint4*>(src + lead) + i);
  }
  const int words = lead / 2 + (bytes - tail) / 2;
  for (int w = lane; w < words; w += kWarpSize) {
    const int offset = w < lead / 2 ? 2 * w : tail + 2 * (w - lead / 2);
    *reinterpret_cast<std::uint16_t*>(dst + offset) =
        __ldg(reinterpret_cast<const std::uint16_t*>(src + offset));
  }
#pragma unroll
  for (int s = 0; s < kVectorsPerLane; ++s) {
    const int i = lane + kWarpSize * s;
    if (i < vectors) reinterpret_cast<uint4*>(dst + lead)[i] = v[s];
  }
  __syncwarp();
  return dst;
}

// Four consecutive inputs, with one 16-byte load when `aligned`.
__device__ __forceinline__ float4 load_x4(const float* x, bool aligned) {
  if (aligned) return __ldg(reinterpret_cast<const float4*>(x));
  return make_float4(__ldg(x), __ldg(x + 1), __ldg(x + 2), __ldg(x + 3));
}

// dots[i] = Σ_j row[j]·x[i·x_stride + j] for i < tokens (≤ kQ8TileTokens); every lane gets them.
// Eight lanes share a block (4 weights each), four blocks per warp step; each lane accumulates
// d·(its 4-term dot) over its blocks in increasing order, and the warp sum adds the lanes in a
// fixed order. `row` must be 2-byte aligned.
__device__ __forceinline__ void q8_warp_row_dots(const std::uint8_t* row, const float* x,
                                                 std::int64_t x_stride, int tokens,
                                                 std::int64_t cols, Q8Stage& stage,
                                                 float (&dots)[kQ8TileTokens]) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int part = lane % 8;
  const std::int64_t blocks = cols / kQ8BlockValues;
  // Every lane's 4 inputs start at a multiple of 4 floats: one 16-byte load when rows allow.
  const bool x_vectors = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && x_stride % 4 == 0;
  float acc[kQ8TileTokens] = {};
  for (std::int64_t first = 0; first < blocks; first += kQ8SpanBlocks) {
    const std::int64_t left = blocks - first;
    const int span_blocks = left < kQ8SpanBlocks ? static_cast<int>(left) : kQ8SpanBlocks;
    __syncwarp();  // the previous span (or call) has been read by every lane
    const std::uint8_t* span =
        stage_span(row + first * kQ8BlockBytes, span_blocks * kQ8BlockBytes, stage);
    for (int b = lane / 8; b < span_blocks; b += 4) {
      const auto* halves = reinterpret_cast<const std::uint16_t*>(span + b * kQ8BlockBytes);
      const float d = __half2float(__ushort_as_half(halves[0]));
      const std::uint16_t q01 = halves[1 + 2 * part];
      const std::uint16_t q23 = halves[2 + 2 * part];
      const float* xb = x + (first + b) * kQ8BlockValues + 4 * part;
#pragma unroll
      for (int i = 0; i < kQ8TileTokens; ++i) {
        if (i < tokens) {
          const float4 xv = load_x4(xb + i * x_stride, x_vectors);
          float dot = static_cast<float>(static_cast<std::int8_t>(q01 & 0xff)) * xv.x;
          dot = fmaf(static_cast<float>(static_cast<std::int8_t>(q01 >> 8)), xv.y, dot);
          dot = fmaf(static_cast<float>(static_cast<std::int8_t>(q23 & 0xff)), xv.z, dot);
          dot = fmaf(static_cast<float>(static_cast<std::int8_t>(q23 >> 8)), xv.w, dot);
          acc[i] = fmaf(d, dot, acc[i]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kQ8TileTokens; ++i) dots[i] = i < tokens ? warp_sum(acc[i]) : 0.0f;
}

}  // namespace turbodecode::cuda
