// One warp's dot products of a Q8_0 weight row with a tile of f32 input rows. The matvec kernel
// and the HC expand fusions share it, so fused and unfused results are bitwise equal.
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

// A row is read in spans of kQ8SpanBlocks blocks (2048 weights, 2176 bytes = 136 16-byte
// chunks), each lane loading its chunks of the span into registers with 16-byte loads, all in
// flight together. The block stages the span's inputs in shared memory:
// a chunk covers about 15 weights, so lane-strided input reads from global memory would touch
// 15 cache lines per warp load, against 2 shared-memory wavefronts.
inline constexpr int kQ8SpanBlocks = 64;
inline constexpr int kQ8SpanCols = kQ8SpanBlocks * kQ8BlockValues;
inline constexpr int kQ8SpanBytes = kQ8SpanBlocks * kQ8BlockBytes;
inline constexpr int kQ8ChunkBytes = 16;
inline constexpr int kQ8ChunksPerLane = (kQ8SpanBytes / kQ8ChunkBytes + kWarpSize - 1) / kWarpSize;
inline constexpr int kQ8TileTokens = 4;  // input rows per weight-row read (T > 1)
// A block is 17 half-words: the f16 scale, then 16 pairs of weights.
inline constexpr int kQ8BlockHalves = kQ8BlockBytes / 2;

// The inputs of one span for a tile of tokens, shared by the block's warps.
struct alignas(16) Q8InputTile {
  float x[kQ8TileTokens][kQ8SpanCols];
};

// Copies inputs [first_col, first_col + cols) of `tokens` rows into the tile, 16 bytes at a time
// when the rows allow. Called by every thread of the block; synchronises before (the previous span
// has been read) and after (the tile is complete).
template <int kThreads>
__device__ __forceinline__ void stage_inputs(const float* x, std::int64_t x_stride, int tokens,
                                             std::int64_t first_col, int cols, Q8InputTile& tile) {
  __syncthreads();
  const bool vectors = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && x_stride % 4 == 0;
  for (int i = 0; i < tokens; ++i) {
    const float* src = x + i * x_stride + first_col;
    if (vectors) {
#pragma unroll 2
      for (int v = threadIdx.x; v < cols / 4; v += kThreads) {
        reinterpret_cast<float4*>(tile.x[i])[v] = __ldg(reinterpret_cast<const float4*>(src) + v);
      }
    } else {
      for (int c = threadIdx.x; c < cols; c += kThreads) tile.x[i][c] = __ldg(src + c);
    }
  }
  __syncthreads();
}

// The f16 bits of a block's scale d.
__device__ __forceinline__ std::uint32_t q8_scale_bits(const std::uint8_t* block) {
  return __ldg(reinterpret_cast<const std::uint16_t*>(block));
}
__device__ __forceinline__ float f16_bits_to_float(std::uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<std::uint16_t>(bits & 0xffffu)));
}

// Weights are widened with integer and add instructions instead of I2F, which runs at a
// quarter of the FP32 rate and would cap the matvec below DRAM speed: flipping the sign bit of
// byte q gives q + 128, placed in the mantissa of 2^23 (0x4B000000) that is exactly
// 2^23 + 128 + q, and subtracting 2^23 + 128 leaves exactly float(q).
inline constexpr std::uint32_t kQ8SignBits = 0x80808080u;
inline constexpr float kQ8BiasedZero = 8388736.0f;  // 2^23 + 128

// Weight `byte` (0..3) of a word of weights XORed with kQ8SignBits.
__device__ __forceinline__ float q8_weight(std::uint32_t biased_word, int byte) {
  return __uint_as_float(__byte_perm(biased_word, 0x4B000000u, 0x7540u + byte)) - kQ8BiasedZero;
}

// What a lane has loaded of one span of its row: up to kQ8ChunksPerLane 16-byte chunks (chunk
// lane + 32·s of the span's 16-byte aligned part), the scales of the blocks they touch, and at
// most one loose half-word from the span's unaligned head or tail. Two 16-bit values share a
// register, so that a whole span stays within 64 registers.
struct Q8SpanLoads {
  uint4 chunk[kQ8ChunksPerLane];
  // Low half: d of the block the chunk starts in; high half: d of the block starting inside
  // the chunk when that block has weights in it, else 0.
  std::uint32_t scales[kQ8ChunksPerLane];
  std::uint32_t loose = 0;  // low half: the weight pair (or a scale); high half: its block's d
};

// Where a span's bytes lie: `lead` bytes before the first 16-byte boundary, `chunks` whole
// chunks, then the tail. Lanes below loose_halves() own one head or tail half-word each.
struct Q8SpanLayout {
  int bytes = 0;
  int lead = 0;
  int chunks = 0;

  __device__ __forceinline__ Q8SpanLayout(const std::uint8_t* span, int span_bytes)
      : bytes(span_bytes) {
    const int misalign = static_cast<int>(reinterpret_cast<std::uintptr_t>(span) % kQ8ChunkBytes);
    lead = min(span_bytes, (kQ8ChunkBytes - misalign) % kQ8ChunkBytes);
    chunks = (span_bytes - lead) / kQ8ChunkBytes;
  }
  __device__ __forceinline__ int loose_halves() const {
    return (bytes - kQ8ChunkBytes * chunks) / 2;
  }
  // Byte offset in the span of loose half-word w.
  __device__ __forceinline__ int loose_offset(int w) const {
    return w < lead / 2 ? 2 * w : kQ8ChunkBytes * chunks + 2 * w;
  }
  // Half-word index in the span of the first half-word of chunk c.
  __device__ __forceinline__ int chunk_half(int c) const {
    return lead / 2 + (kQ8ChunkBytes / 2) * c;
  }
};

// Issues every load of the lane's part of the span before any is used.
__device__ __forceinline__ void load_span(const std::uint8_t* span, const Q8SpanLayout& layout,
                                          int lane, Q8SpanLoads& loads) {
  const uint4* chunks = reinterpret_cast<const uint4*>(span + layout.lead);
#pragma unroll
  for (int s = 0; s < kQ8ChunksPerLane; ++s) {
    const int c = lane + kWarpSize * s;
    loads.scales[s] = 0;
    if (c < layout.chunks) {
      loads.chunk[s] = __ldg(chunks + c);
      const int half = layout.chunk_half(c);
      const int block = half / kQ8BlockHalves;
      const int position = half - block * kQ8BlockHalves;
      loads.scales[s] = q8_scale_bits(span + block * kQ8BlockBytes);
      // The next block's weights start inside this chunk when its scale is at half ≤ 6.
      if (position + 7 > kQ8BlockHalves) {
        loads.scales[s] |= q8_scale_bits(span + (block + 1) * kQ8BlockBytes) << 16;
      }
    }
  }
  if (lane < layout.loose_halves()) {
    const int offset = layout.loose_offset(lane);
    loads.loose = __ldg(reinterpret_cast<const std::uint16_t*>(span + offset)) |
                  q8_scale_bits(span + offset / kQ8BlockBytes * kQ8BlockBytes) << 16;
  }
}

// Adds the lane's part of the span to acc[i] for tokens i < tokens: per chunk, the weights of
// the block it starts in and of the next block are summed separately (half-words in order) and
// then scaled by their d; the loose half-word comes last.
__device__ __forceinline__ void accumulate_span(const Q8SpanLoads& loads,
                                                const Q8SpanLayout& layout, int lane,
                                                const Q8InputTile& tile, int tokens,
                                                float (&acc)[kQ8TileTokens]) {
#pragma unroll
  for (int s = 0; s < kQ8ChunksPerLane; ++s) {
    const int c = lane + kWarpSize * s;
    if (c >= layout.chunks) continue;
    const int half = layout.chunk_half(c);
    const int block = half / kQ8BlockHalves;
    const int position = half - block * kQ8BlockHalves;  // of the chunk's first half-word
    // Weight pair p of block b is at columns 32b + 2(p − 1); the next block's pairs sit one
    // half-word (its scale) later in the chunk, hence 2 columns earlier relative to `col`.
    const int col = kQ8BlockValues * block + 2 * (position - 1);
    const std::uint32_t words[4] = {loads.chunk[s].x ^ kQ8SignBits, loads.chunk[s].y ^ kQ8SignBits,
                                    loads.chunk[s].z ^ kQ8SignBits, loads.chunk[s].w ^ kQ8SignBits};
#pragma unroll
    for (int i = 0; i < kQ8TileTokens; ++i) {
      if (i >= tokens) continue;
      float first = 0.0f;
      float next = 0.0f;
#pragma unroll
      for (int k = 0; k < kQ8ChunkBytes / 2; ++k) {
        const int p = position + k;
        if (p == 0 || p == kQ8BlockHalves) continue;  // a scale
        const float low = q8_weight(words[k / 2], 2 * (k % 2));
        const float high = q8_weight(words[k / 2], 2 * (k % 2) + 1);
        const bool in_next = p > kQ8BlockHalves;
        const float2 xv =
            *reinterpret_cast<const float2*>(&tile.x[i][col + 2 * k - (in_next ? 2 : 0)]);
        if (in_next) {
          next = fmaf(low, xv.x, next);
          next = fmaf(high, xv.y, next);
        } else {
          first = fmaf(low, xv.x, first);
          first = fmaf(high, xv.y, first);
        }
      }
      acc[i] = fmaf(f16_bits_to_float(loads.scales[s]), first, acc[i]);
      acc[i] = fmaf(f16_bits_to_float(loads.scales[s] >> 16), next, acc[i]);
    }
  }
  if (lane < layout.loose_halves()) {
    const int half = layout.loose_offset(lane) / 2;
    const int block = half / kQ8BlockHalves;
    const int position = half - block * kQ8BlockHalves;
    if (position != 0) {
      const int col = kQ8BlockValues * block + 2 * (position - 1);
#pragma unroll
      for (int i = 0; i < kQ8TileTokens; ++i) {
        if (i >= tokens) continue;
        const float2 xv = *reinterpret_cast<const float2*>(&tile.x[i][col]);
        const std::uint32_t biased = loads.loose ^ kQ8SignBits;
        float dot = q8_weight(biased, 0) * xv.x;
        dot = fmaf(q8_weight(biased, 1), xv.y, dot);
        acc[i] = fmaf(f16_bits_to_float(loads.loose >> 16), dot, acc[i]);
      }
    }
  }
}

// dots[i] = Σ_j row[j]·x[i·x_stride + j] for i < tokens (≤ kQ8TileTokens); every lane of the warp
// gets them. Called by every thread of a block of kThreads threads (it synchronises the block);
// a warp without a row passes row = nullptr and gets zeros. Each lane accumulates its chunks in
// span and chunk order, and the warp sum adds the lanes in a fixed order, so a token's result
// depends neither on the batch nor on the kernel. `row` must be 2-byte aligned.
template <int kThreads>
__device__ __forceinline__ void q8_warp_row_dots(const std::uint8_t* row, const float* x,
                                                 std::int64_t x_stride, int tokens,
                                                 std::int64_t cols, Q8InputTile& tile,
                                                 float (&dots)[kQ8TileTokens]) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t blocks = cols / kQ8BlockValues;
  float acc[kQ8TileTokens] = {};
  for (std::int64_t first = 0; first < blocks; first += kQ8SpanBlocks) {
    const std::int64_t left = blocks - first;
    const int span_blocks = left < kQ8SpanBlocks ? static_cast<int>(left) : kQ8SpanBlocks;
    const std::uint8_t* span = row != nullptr ? row + first * kQ8BlockBytes : nullptr;
    const Q8SpanLayout layout(span, span != nullptr ? span_blocks * kQ8BlockBytes : 0);
    Q8SpanLoads loads;
    load_span(span, layout, lane, loads);  // in flight while the inputs are staged
    stage_inputs<kThreads>(x, x_stride, tokens, first * kQ8BlockValues,
                           span_blocks * kQ8BlockValues, tile);
    accumulate_span(loads, layout, lane, tile, tokens, acc);
  }
#pragma unroll
  for (int i = 0; i < kQ8TileTokens; ++i) dots[i] = i < tokens ? warp_sum(acc[i]) : 0.0f;
}

}  // namespace turbodecode::cuda
