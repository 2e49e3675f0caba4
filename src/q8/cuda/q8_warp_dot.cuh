// One warp's dot products of a Q8_0 weight row with a tile of f32 input rows. The matvec kernel
// and the HC expand fusions share it, so fused and unfused results are bitwise equal.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "common/cuda/dependent_launch.cuh"
#include "common/cuda/shared_memory_opt_in.cuh"
#include "common/cuda/warp.cuh"
#include "q8/cuda/q8_widen.cuh"
#include "turbodecode/q8.h"

namespace turbodecode::cuda {

// A row is read in spans of kQ8SpanBlocks blocks (2048 weights, 2176 bytes): a 2048-column row
// is one span, so all of its loads are in flight at once. Each lane loads its 16-byte chunks of
// the span into registers, the warp stores them in its shared row buffer, and each lane then
// reads back whole blocks, 2·lane and 2·lane + 1: their words are 17 words apart from one lane
// to the next, so every read hits 32 distinct banks, and both blocks of a step start at the same
// address mod 4 in every lane, so the byte positions of the weights are compile-time. The
// registers already hold the next span's loads while this span is computed.
inline constexpr int kQ8SpanBlocks = 64;
inline constexpr int kQ8SpanCols = kQ8SpanBlocks * kQ8BlockValues;
inline constexpr int kQ8SpanBytes = kQ8SpanBlocks * kQ8BlockBytes;
inline constexpr int kQ8ChunkBytes = 16;
inline constexpr int kQ8ChunksPerLane = (kQ8SpanBytes / kQ8ChunkBytes + kWarpSize - 1) / kWarpSize;
inline constexpr int kQ8TileTokens = 4;  // input rows per weight-row read (T > 1)
// The inputs of a lane's block pair are 64 floats; a pad of 4 floats after each pair makes
// pair p start in group of banks p mod 8, so 8 consecutive lanes read their float4 from 8
// different groups (no bank conflict).
inline constexpr int kQ8PairCols = 2 * kQ8BlockValues;
inline constexpr int kQ8PairFloats = kQ8PairCols + 4;
inline constexpr int kQ8TileRowFloats = kQ8SpanBlocks / 2 * kQ8PairFloats;

// The inputs of one span for kTokens rows, shared by the block's warps: column c of the span at
// q8_tile_index(c).
template <int kTokens>
struct alignas(16) Q8InputTile {
  float x[kTokens][kQ8TileRowFloats];
};

__host__ __device__ constexpr int q8_tile_index(int col) {
  return col + (kQ8PairFloats - kQ8PairCols) * (col / kQ8PairCols);
}

// One warp's copy of a span: byte i of the span at bytes[shift + i], where shift is the span's
// address modulo 16, so that its 16-byte chunks land on 16-byte boundaries. The slack covers the
// shift and the last block's aligned word reads.
struct alignas(16) Q8RowBuffer {
  std::uint8_t bytes[kQ8SpanBytes + kQ8ChunkBytes];
};

// The shared memory of a block of kWarps warps that call q8_warp_row_dots (dynamic: above
// 48 KB at kTokens = 4).
template <int kWarps, int kTokens>
struct Q8WarpShared {
  Q8InputTile<kTokens> tile;
  Q8RowBuffer buffers[kWarps];
};

// The dynamic shared-memory bytes of kKernel, a kernel of kWarps warps that calls
// q8_warp_row_dots on kTokens rows; the first call opts it in where that is above 48 KB.
template <auto kKernel, int kWarps, int kTokens>
int q8_warp_shared_bytes() {
  constexpr int kBytes = sizeof(Q8WarpShared<kWarps, kTokens>);
  if constexpr (kBytes > 48 * 1024) {
    static SharedMemoryOptIn opt_in;
    opt_in.ensure(reinterpret_cast<const void*>(kKernel), kBytes);
  }
  return kBytes;
}

// Copies inputs [first_col, first_col + cols) of kTokens rows into the tile, 16 bytes at a time
// when the rows allow. Called by every thread of the block; synchronises before (the previous span
// has been read) and after (the tile is complete).
template <int kThreads, int kTokens>
__device__ __forceinline__ void stage_inputs(const float* x, std::int64_t x_stride, int first_col,
                                             int cols, Q8InputTile<kTokens>& tile) {
  constexpr int kVectorsPerThread = (kQ8SpanCols / 4 + kThreads - 1) / kThreads;
  __syncthreads();
  const bool vectors = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && x_stride % 4 == 0;
#pragma unroll
  for (int i = 0; i < kTokens; ++i) {
    const float* src = x + i * x_stride + first_col;
    if (vectors) {
#pragma unroll
      for (int s = 0; s < kVectorsPerThread; ++s) {
        const int v = static_cast<int>(threadIdx.x) + kThreads * s;
        if (v < cols / 4) {
          *reinterpret_cast<float4*>(&tile.x[i][q8_tile_index(4 * v)]) =
              __ldg(reinterpret_cast<const float4*>(src) + v);
        }
      }
    } else {
      // The fallback stays a loop: unrolled, its hoisted addresses cost registers.
#pragma unroll 1
      for (int c = static_cast<int>(threadIdx.x); c < cols; c += kThreads) {
        tile.x[i][q8_tile_index(c)] = __ldg(src + c);
      }
    }
  }
  __syncthreads();
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
  const uint4* lane_chunks = reinterpret_cast<const uint4*>(span + layout.lead) + lane;
#pragma unroll
  for (int s = 0; s < kQ8ChunksPerLane; ++s) {
    if (lane + kWarpSize * s < layout.chunks) loads.chunk[s] = __ldg(lane_chunks + kWarpSize * s);
  }
  if (lane < layout.loose_halves()) {
    loads.loose = __ldg(reinterpret_cast<const std::uint16_t*>(span + layout.loose_offset(lane)));
  }
}

// Stores the lane's loads into the warp's row buffer (the caller synchronises the warp).
__device__ __forceinline__ void store_span(const Q8SpanLoads& loads, const Q8SpanLayout& layout,
                                           int lane, Q8RowBuffer& buffer) {
  std::uint8_t* base = buffer.bytes + layout.shift;
  auto* lane_chunks = reinterpret_cast<uint4*>(base + layout.lead) + lane;
#pragma unroll
  for (int s = 0; s < kQ8ChunksPerLane; ++s) {
    if (lane + kWarpSize * s < layout.chunks) lane_chunks[kWarpSize * s] = loads.chunk[s];
  }
  if (lane < layout.loose_halves()) {
    *reinterpret_cast<std::uint16_t*>(base + layout.loose_offset(lane)) = loads.loose;
  }
}

// Adds d·Σ_j q_j·x_ij (j in order) of one buffered block to acc[i] for tokens i < kTokens.
// `words` is the block's start rounded down to 4 bytes and kLead the offset of q_0 from there:
// 2 (d in the low half of words[0]) or 4 (d in its high half), so that each weight is one
// compile-time byte of one word. `inputs` are the block's 32 inputs of token 0 in the tile.
template <int kLead, int kTokens>
__device__ __forceinline__ void accumulate_block(const std::uint32_t* words, const float* inputs,
                                                 float (&acc)[kTokens]) {
  static_assert(kLead == 2 || kLead == 4, "blocks start on even bytes");
  constexpr int kWords = (kLead + kQ8BlockValues + 3) / 4;
  std::uint32_t biased[kWords];
#pragma unroll
  for (int m = 0; m < kWords; ++m) biased[m] = words[m] ^ kQ8SignBits;
  const std::uint32_t d_bits = kLead == 2 ? words[0] : words[0] >> 16;
  const float d = __half2float(__ushort_as_half(static_cast<std::uint16_t>(d_bits & 0xffffu)));
  float dots[kTokens];
#pragma unroll
  for (int k = 0; k < kQ8BlockValues / 4; ++k) {
    float w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int byte = kLead + 4 * k + e;
      w[e] = q8_weight(biased[byte / 4], byte % 4);
    }
#pragma unroll
    for (int i = 0; i < kTokens; ++i) {
      const float4 xv = *reinterpret_cast<const float4*>(inputs + kQ8TileRowFloats * i + 4 * k);
      float dot = k == 0 ? w[0] * xv.x : fmaf(w[0], xv.x, dots[i]);
      dot = fmaf(w[1], xv.y, dot);
      dot = fmaf(w[2], xv.z, dot);
      dots[i] = fmaf(w[3], xv.w, dot);
    }
  }
#pragma unroll
  for (int i = 0; i < kTokens; ++i) acc[i] = fmaf(d, dots[i], acc[i]);
}

// Adds the lane's blocks of a buffered span to acc: block 2·lane, then 2·lane + 1 (when the span
// has it). kLead is that of block 2·lane (2 + its address mod 4); the next block, 34 bytes on,
// has the other one.
template <int kLead, int kTokens>
__device__ __forceinline__ void accumulate_lane_blocks(const std::uint8_t* first, bool both,
                                                       const float* inputs, float (&acc)[kTokens]) {
  constexpr int kNextLead = 6 - kLead;
  const auto* words = reinterpret_cast<const std::uint32_t*>(first - (kLead - 2));
  const auto* next_words =
      reinterpret_cast<const std::uint32_t*>(first + kQ8BlockBytes - (kNextLead - 2));
  // Both blocks in one branch, so that their independent sums can interleave.
  if (both) {
    accumulate_block<kLead>(words, inputs, acc);
    accumulate_block<kNextLead>(next_words, inputs + kQ8BlockValues, acc);
  } else {
    accumulate_block<kLead>(words, inputs, acc);
  }
}

// Adds the lane's part of a buffered span (byte i at buffer.bytes[shift + i]) to acc[i] for
// tokens i < kTokens.
template <int kTokens>
__device__ __forceinline__ void accumulate_span(const Q8RowBuffer& buffer, int shift,
                                                int span_blocks, int lane,
                                                const Q8InputTile<kTokens>& tile,
                                                float (&acc)[kTokens]) {
  const int first_block = 2 * lane;
  if (first_block >= span_blocks) return;
  const std::uint8_t* first = buffer.bytes + shift + kQ8BlockBytes * first_block;
  const float* inputs = &tile.x[0][kQ8PairFloats * lane];
  const bool both = first_block + 1 < span_blocks;
  // shift is even, and block 2·lane lies 68·lane bytes on: its address mod 4 is shift mod 4 in
  // every lane.
  if (shift % 4 == 0) {
    accumulate_lane_blocks<2>(first, both, inputs, acc);
  } else {
    accumulate_lane_blocks<4>(first, both, inputs, acc);
  }
}

// dots[i] = Σ_j row[j]·x[i·x_stride + j] for i < kTokens (≤ kQ8TileTokens, compile-time, so a
// decode step issues no instructions for absent rows); every lane of the warp gets them. Called
// by every thread of a block of kThreads threads (it synchronises the block); a warp without a
// row passes row = nullptr and gets zeros. Each lane accumulates its blocks in span order, and
// the warp sum adds the lanes in a fixed order, so a token's result depends neither on the
// batch nor on the kernel. `row` must be 2-byte aligned.
template <int kThreads, int kTokens>
__device__ __forceinline__ void q8_warp_row_dots(const std::uint8_t* row, const float* x,
                                                 std::int64_t x_stride, std::int64_t cols,
                                                 Q8InputTile<kTokens>& tile, Q8RowBuffer& buffer,
                                                 float (&dots)[kTokens]) {
  static_assert(kTokens >= 1 && kTokens <= kQ8TileTokens, "a tile holds kQ8TileTokens rows");
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  // In 32 bits: a row of 2^31 blocks would be 73 GB.
  const int blocks = static_cast<int>(cols / kQ8BlockValues);
  const auto span_at = [&](int first) {
    return row != nullptr ? row + kQ8BlockBytes * first : nullptr;
  };
  const auto blocks_at = [&](int first) { return min(blocks - first, kQ8SpanBlocks); };
  float acc[kTokens] = {};
  Q8SpanLoads loads;
  // The caller's launch may overlap the kernel before it: nothing is read before that completes.
  wait_for_prior_grids();
  Q8SpanLayout layout(span_at(0), row != nullptr ? blocks_at(0) * kQ8BlockBytes : 0);
  load_span(span_at(0), layout, lane, loads);
  for (int first = 0; first < blocks; first += kQ8SpanBlocks) {
    const int span_blocks = blocks_at(first);
    // The loads of this span are in flight while its inputs are staged.
    stage_inputs<kThreads, kTokens>(x, x_stride, first * kQ8BlockValues,
                                    span_blocks * kQ8BlockValues, tile);
    __syncwarp();  // the previous span's buffer has been read by every lane
    store_span(loads, layout, lane, buffer);
    __syncwarp();
    const int shift = layout.shift;
    const int next = first + kQ8SpanBlocks;
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
