// One warp's dot products of a Q8_0 weight row with a tile of f32 input rows. The matvec kernel
// and the HC expand fusions share it, so fused and unfused results are bitwise equal.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "q8/cuda/q8_widen.cuh"
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

// A row is read in spans of kQ8SpanBlocks blocks (1024 weights, 1088 bytes). Each lane loads
// its 16-byte chunks of the span into registers (all in flight together), the warp stores them
// in its shared row buffer, and then reads them back block by block: the 34-byte blocks do not
// line up with 16-byte chunks, and the buffer turns that into aligned shared-memory reads. The
// registers then already hold the next span's loads while this span is computed.
inline constexpr int kQ8SpanBlocks = 32;
inline constexpr int kQ8SpanCols = kQ8SpanBlocks * kQ8BlockValues;
inline constexpr int kQ8SpanBytes = kQ8SpanBlocks * kQ8BlockBytes;
inline constexpr int kQ8ChunkBytes = 16;
inline constexpr int kQ8ChunksPerLane = (kQ8SpanBytes / kQ8ChunkBytes + kWarpSize - 1) / kWarpSize;
inline constexpr int kQ8TileTokens = 4;  // input rows per weight-row read (T > 1)
// A warp computes kQ8GroupBlocks blocks at a time: lane l takes weights 4(l % 8) .. 4(l % 8) + 3
// of block l / 8, so the group's inputs are one contiguous float4 per lane.
inline constexpr int kQ8GroupBlocks = kWarpSize * 4 / kQ8BlockValues;
inline constexpr int kQ8LaneValues = 4;

// The inputs of one span for a tile of tokens, shared by the block's warps.
struct alignas(16) Q8InputTile {
  float x[kQ8TileTokens][kQ8SpanCols];
};

// One warp's copy of a span: byte i of the span at bytes[shift + i], where shift is the span's
// address modulo 16, so that its 16-byte chunks land on 16-byte boundaries. The slack covers the
// shift and the last block's aligned word reads.
struct alignas(16) Q8RowBuffer {
  std::uint8_t bytes[kQ8SpanBytes + 2 * kQ8ChunkBytes];
};

// Copies inputs [first_col, first_col + cols) of kTokens rows into the tile, 16 bytes at a time
// when the rows allow. Called by every thread of the block; synchronises before (the previous span
// has been read) and after (the tile is complete).
template <int kThreads, int kTokens>
__device__ __forceinline__ void stage_inputs(const float* x, std::int64_t x_stride,
                                             std::int64_t first_col, int cols, Q8InputTile& tile) {
  __syncthreads();
  const bool vectors = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && x_stride % 4 == 0;
#pragma unroll
  for (int i = 0; i < kTokens; ++i) {
    const float* src = x + i * x_stride + first_col;
    if (vectors) {
      for (int v = threadIdx.x; v < cols / 4; v += kThreads) {
        reinterpret_cast<float4*>(tile.x[i])[v] = __ldg(reinterpret_cast<const float4*>(src) + v);
      }
    } else {
      for (int c = threadIdx.x; c < cols; c += kThreads) tile.x[i][c] = __ldg(src + c);
    }
  }
  __syncthreads();
}

__device__ __forceinline__ float f16_bits_to_float(std::uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<std::uint16_t>(bits & 0xffffu)));
}

// Where a span's bytes lie: `lead` bytes before the first 16-byte boundary, `chunks` whole
// chunks, then the tail. Lanes below loose_halves() own one head or tail half-word each.
struct Q8SpanLayout {
  int bytes = 0;
  int shift = 0;  // the span's address modulo 16
  int lead = 0;
  int chunks = 0;

  __device__ __forceinline__ Q8SpanLayout(const std::uint8_t* span, int span_bytes)
      : bytes(span_bytes) {
    shift = static_cast<int>(reinterpret_cast<std::uintptr_t>(span) % kQ8ChunkBytes);
    lead = min(span_bytes, (kQ8ChunkBytes - shift) % kQ8ChunkBytes);
    chunks = (span_bytes - lead) / kQ8ChunkBytes;
  }
  __device__ __forceinline__ int loose_halves() const {
    return (bytes - kQ8ChunkBytes * chunks) / 2;
  }
  // Byte offset in the span of loose half-word w.
  __device__ __forceinline__ int loose_offset(int w) const {
    return w < lead / 2 ? 2 * w : lead + kQ8ChunkBytes * chunks + 2 * (w - lead / 2);
  }
};

// A lane's loads of one span: chunks lane + 32·s of the span's aligned part and at most one
// loose half-word of its head or tail.
struct Q8SpanLoads {
  uint4 chunk[kQ8ChunksPerLane];
  std::uint16_t loose = 0;
};

// Issues every load of the lane's part of the span before any is used.
__device__ __forceinline__ void load_span(const std::uint8_t* span, const Q8SpanLayout& layout,
                                          int lane, Q8SpanLoads& loads) {
  const uint4* chunks = reinterpret_cast<const uint4*>(span + layout.lead);
#pragma unroll
  for (int s = 0; s < kQ8ChunksPerLane; ++s) {
    const int c = lane + kWarpSize * s;
    if (c < layout.chunks) loads.chunk[s] = __ldg(chunks + c);
  }
  if (lane < layout.loose_halves()) {
    loads.loose = __ldg(reinterpret_cast<const std::uint16_t*>(span + layout.loose_offset(lane)));
  }
}

// Stores the lane's loads into the warp's row buffer (the caller synchronises the warp).
__device__ __forceinline__ void store_span(const Q8SpanLoads& loads, const Q8SpanLayout& layout,
                                           int lane, Q8RowBuffer& buffer) {
  std::uint8_t* base = buffer.bytes + layout.shift;
#pragma unroll
  for (int s = 0; s < kQ8ChunksPerLane; ++s) {
    const int c = lane + kWarpSize * s;
    if (c < layout.chunks) {
      *reinterpret_cast<uint4*>(base + layout.lead + kQ8ChunkBytes * c) = loads.chunk[s];
    }
  }
  if (lane < layout.loose_halves()) {
    *reinterpret_cast<std::uint16_t*>(base + layout.loose_offset(lane)) = loads.loose;
  }
}

// The 4 bytes at an even, possibly unaligned, offset of the row buffer.
__device__ __forceinline__ std::uint32_t buffer_word(const Q8RowBuffer& buffer, int offset) {
  const auto* words = reinterpret_cast<const std::uint32_t*>(buffer.bytes + (offset & ~3));
  return __funnelshift_r(words[0], words[1], 8 * (offset & 3));
}

// Adds the lane's part of a buffered span to acc[i] for tokens i < kTokens: per group of
// kQ8GroupBlocks blocks, the lane's 4 products summed in order, then scaled by the block's d.
template <int kTokens>
__device__ __forceinline__ void accumulate_span(const Q8RowBuffer& buffer, int shift,
                                                int span_blocks, int lane, const Q8InputTile& tile,
                                                float (&acc)[kTokens]) {
  const int quarter = lane % (kQ8BlockValues / kQ8LaneValues);
  const int lane_block = lane / (kQ8BlockValues / kQ8LaneValues);
  // Unrolled only while the rows' inputs fit the 64 registers of 4 blocks per SM.
#pragma unroll(kTokens > 2 ? 1 : 2)
  for (int first = 0; first < span_blocks; first += kQ8GroupBlocks) {
    const int block = first + lane_block;
    if (block >= span_blocks) break;
    const int offset = shift + kQ8BlockBytes * block;
    const float d =
        f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(buffer.bytes + offset));
    const std::uint32_t biased =
        buffer_word(buffer, offset + 2 + kQ8LaneValues * quarter) ^ kQ8SignBits;
    const float w0 = q8_weight(biased, 0);
    const float w1 = q8_weight(biased, 1);
    const float w2 = q8_weight(biased, 2);
    const float w3 = q8_weight(biased, 3);
    const int col = kQ8BlockValues * first + kQ8LaneValues * lane;
#pragma unroll
    for (int i = 0; i < kTokens; ++i) {
      const float4 xv = *reinterpret_cast<const float4*>(&tile.x[i][col]);
      float dot = w0 * xv.x;
      dot = fmaf(w1, xv.y, dot);
      dot = fmaf(w2, xv.z, dot);
      dot = fmaf(w3, xv.w, dot);
      acc[i] = fmaf(d, dot, acc[i]);
    }
  }
}

// dots[i] = Σ_j row[j]·x[i·x_stride + j] for i < kTokens (≤ kQ8TileTokens, compile-time, so a
// decode step issues no instructions for absent rows); every lane of the warp gets them. Called
// by every thread of a block of kThreads threads (it synchronises the block); a warp without a
// row passes row = nullptr and gets zeros. Each lane accumulates its weights in span and group
// order, and the warp sum adds the lanes in a fixed order, so a token's result depends neither
// on the batch nor on the kernel. `row` must be 2-byte aligned.
template <int kThreads, int kTokens>
__device__ __forceinline__ void q8_warp_row_dots(const std::uint8_t* row, const float* x,
                                                 std::int64_t x_stride, std::int64_t cols,
                                                 Q8InputTile& tile, Q8RowBuffer& buffer,
                                                 float (&dots)[kTokens]) {
  static_assert(kTokens >= 1 && kTokens <= kQ8TileTokens, "a tile holds kQ8TileTokens rows");
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t blocks = cols / kQ8BlockValues;
  const auto span_at = [&](std::int64_t first) {
    return row != nullptr ? row + first * kQ8BlockBytes : nullptr;
  };
  const auto blocks_at = [&](std::int64_t first) {
    const std::int64_t left = blocks - first;
    return left < kQ8SpanBlocks ? static_cast<int>(left) : kQ8SpanBlocks;
  };
  float acc[kTokens] = {};
  Q8SpanLoads loads;
  Q8SpanLayout layout(span_at(0), row != nullptr ? blocks_at(0) * kQ8BlockBytes : 0);
  load_span(span_at(0), layout, lane, loads);
  for (std::int64_t first = 0; first < blocks; first += kQ8SpanBlocks) {
    const int span_blocks = blocks_at(first);
    // The loads of this span are in flight while its inputs are staged.
    stage_inputs<kThreads, kTokens>(x, x_stride, first * kQ8BlockValues,
                                    span_blocks * kQ8BlockValues, tile);
    __syncwarp();  // the previous span's buffer has been read by every lane
    store_span(loads, layout, lane, buffer);
    __syncwarp();
    const int shift = layout.shift;
    const std::int64_t next = first + kQ8SpanBlocks;
    if (next < blocks) {
      layout = Q8SpanLayout(span_at(next), row != nullptr ? blocks_at(next) * kQ8BlockBytes : 0);
      load_span(span_at(next), layout, lane, loads);
    }
    if (row != nullptr) accumulate_span<kTokens>(buffer, shift, span_blocks, lane, tile, acc);
  }
#pragma unroll
  for (int i = 0; i < kTokens; ++i) dots[i] = warp_sum(acc[i]);
}

// Runs launch.template operator()<kTokens>(first_token, tiles) over T token rows: whole tiles of
// kQ8TileTokens rows, then one tile of the T mod kQ8TileTokens rows left.
template <class Launch>
void for_each_q8_tile_size(std::int64_t tokens, const Launch& launch) {
  const std::int64_t whole = tokens / kQ8TileTokens;
  if (whole > 0) launch.template operator()<kQ8TileTokens>(0, whole);
  const std::int64_t first = whole * kQ8TileTokens;
  switch (tokens - first) {
    case 1:
      launch.template operator()<1>(first, 1);
      break;
    case 2:
      launch.template operator()<2>(first, 1);
      break;
    case 3:
      launch.template operator()<3>(first, 1);
      break;
    default:
      break;
  }
}

}  // namespace turbodecode::cuda
