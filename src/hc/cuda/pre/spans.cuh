// The span arithmetic of norm-mix and HC-pre, shared by the grid kernel (grid.cu) and the
// cluster kernels (cluster_small_t.cu, row_clusters.cu), so that all compute every mix
// output with the same operations in the same order: a row's results do not depend on which
// kernel ran it.
//
// A row of n·E values is cut into chunks of 256 columns, a chunk into two halves of 128, a half
// into four spans of 32. A warp computes one span for a group of up to 8 rows on the tensor
// cores (mma.sync m16n8k8, TF32): A is 16 mix outputs × 8 columns of W (F16, exact in TF32), B
// is 8 columns × the group's rows of x, split into three TF32 parts (hi + mid + lo = x exactly),
// so that the products are exact and only the f32 sums round. Lane 4g + t holds row g of the
// group and outputs g, g + 8 of each 16-output tile, at the 8 consecutive columns 8t .. 8t + 7
// of the span. A chunk's value is ((s0 + s1) + s2) + s3 of its first half plus the same of its
// second; every kernel's combine then gives lane l of a warp chunks l, l + 32, … to add in order,
// from 0, and adds the lanes with warp_sum (combine_in_lane_order does the same on one thread).
// A single row may instead pack its three parts into one B tile (span_products_packed): the
// same bits with a third of the MMAs.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "common/cuda/mma_tf32.cuh"
#include "common/cuda/warp.cuh"
#include "hc/hc_args.h"
#include "hc/hc_math.h"
#include "hc/pre_workspace.h"

namespace turbodecode::cuda {

inline constexpr int kHalfWidth = hc::kPreChunkWidth / 2;
inline constexpr int kSpanWidth = 32;
inline constexpr int kSpansPerHalf = kHalfWidth / kSpanWidth;
inline constexpr int kLaneColumns = 8;   // a lane's consecutive columns: one 16-byte W load
inline constexpr int kTileOutputs = 16;  // MMA m
inline constexpr int kRoundTiles = 2;    // a warp computes 32 mix outputs at a time
inline constexpr int kRoundOutputs = kRoundTiles * kTileOutputs;
static_assert(kSpanWidth == 4 * kLaneColumns, "lanes 4g .. 4g + 3 cover a span");

struct LaneInputs {
  float v[kLaneColumns];
};
struct LaneWeights {
  float v[kRoundTiles][2][kLaneColumns];  // [tile][output g, g + 8][column]
};

// x split into three TF32 parts (split_tf32_exact), lane by lane.
struct SplitInputs {
  unsigned hi[kLaneColumns];
  unsigned mid[kLaneColumns];
  unsigned lo[kLaneColumns];
};

__device__ __forceinline__ SplitInputs split_inputs(const LaneInputs& x) {
  SplitInputs parts;
#pragma unroll
  for (int j = 0; j < kLaneColumns; ++j) {
    split_tf32_exact(x.v[j], parts.hi[j], parts.mid[j], parts.lo[j]);
  }
  return parts;
}

// The group row whose inputs lane group g loads for the MMAs' B, or −1 for none: row g, or for a
// single row (span_products_packed) row 0 in the groups that hold its three parts.
inline constexpr int kPackedParts = 3;

template <int kRows>
__device__ __forceinline__ int span_input_row(int g, int rows) {
  if constexpr (kRows == 1) return g < kPackedParts ? 0 : -1;
  return g < rows ? g : -1;
}

// 8 consecutive x values from a 16-byte aligned address.
__device__ __forceinline__ LaneInputs load_lane_inputs(const float* src) {
  const float4 first = __ldg(reinterpret_cast<const float4*>(src));
  const float4 second = __ldg(reinterpret_cast<const float4*>(src) + 1);
  return {{first.x, first.y, first.z, first.w, second.x, second.y, second.z, second.w}};
}

// 8 consecutive F16 weights (one 16-byte load) widened to f32.
__device__ __forceinline__ void widen_lane_weights(const uint4& raw, float (&w)[kLaneColumns]) {
  const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] & 0xffffu)));
    w[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] >> 16)));
  }
}

// The span's dot products for 32 outputs × 8 rows. K-step j pairs k-index t with column
// 8t + 2j and k-index t + 4 with column 8t + 2j + 1 (lane t's columns, the same map for A and
// B), so the four steps cover the span's 32 columns. The hi, mid and lo parts of x accumulate
// in separate chains, added at the end as hi + (mid + lo).
__device__ __forceinline__ void span_products(const LaneWeights& w, const SplitInputs& x,
                                              bool second_tile, float (&d)[kRoundTiles][4]) {
  float hi[kRoundTiles][4] = {};
  float mid[kRoundTiles][4] = {};
  float lo[kRoundTiles][4] = {};
#pragma unroll
  for (int j = 0; j < kLaneColumns / 2; ++j) {
#pragma unroll
    for (int q = 0; q < kRoundTiles; ++q) {
      if (q > 0 && !second_tile) continue;
      const unsigned a[4] = {__float_as_uint(w.v[q][0][2 * j]), __float_as_uint(w.v[q][1][2 * j]),
                             __float_as_uint(w.v[q][0][2 * j + 1]),
                             __float_as_uint(w.v[q][1][2 * j + 1])};
      mma_tf32(hi[q], a, x.hi[2 * j], x.hi[2 * j + 1]);
      mma_tf32(mid[q], a, x.mid[2 * j], x.mid[2 * j + 1]);
      mma_tf32(lo[q], a, x.lo[2 * j], x.lo[2 * j + 1]);
    }
  }
#pragma unroll
  for (int q = 0; q < kRoundTiles; ++q) {
#pragma unroll
    for (int i = 0; i < 4; ++i) d[q][i] = hi[q][i] + (mid[q][i] + lo[q][i]);
  }
}

// A single row's span with its three parts of x packed into one B tile: lane groups g = 0, 1, 2
// hold the row's hi, mid and lo as three columns, so one chain of MMAs per tile does the work of
// three. Each MMA output element depends only on its own row of A and column of B, so a column
// gets the bits its part's own chain would (span_products). Lanes 4g hold the row's results for
// outputs g and g + 8 of each tile: hi + (mid + lo), lo taken from lane 4g + 1. Lane groups
// g ≥ 3 hold zeros (span_input_row), whose columns nobody reads.
__device__ __forceinline__ void span_products_packed(const LaneWeights& w, const SplitInputs& x,
                                                     float (&d)[kRoundTiles][2]) {
  const int g = static_cast<int>(threadIdx.x) % kWarpSize / 4;
  unsigned b[kLaneColumns];
#pragma unroll
  for (int j = 0; j < kLaneColumns; ++j) b[j] = g == 0 ? x.hi[j] : g == 1 ? x.mid[j] : x.lo[j];
  // Lane 4g: D(g, 0) = hi, D(g, 1) = mid, D(g + 8, 0), D(g + 8, 1); lane 4g + 1: lo in D(·, 2).
  float parts[kRoundTiles][4] = {};
#pragma unroll
  for (int j = 0; j < kLaneColumns / 2; ++j) {
#pragma unroll
    for (int q = 0; q < kRoundTiles; ++q) {
      const unsigned a[4] = {__float_as_uint(w.v[q][0][2 * j]), __float_as_uint(w.v[q][1][2 * j]),
                             __float_as_uint(w.v[q][0][2 * j + 1]),
                             __float_as_uint(w.v[q][1][2 * j + 1])};
      mma_tf32(parts[q], a, b[2 * j], b[2 * j + 1]);
    }
  }
#pragma unroll
  for (int q = 0; q < kRoundTiles; ++q) {
    const float lo_g = __shfl_xor_sync(kFullWarpMask, parts[q][0], 1);
    const float lo_g8 = __shfl_xor_sync(kFullWarpMask, parts[q][2], 1);
    d[q][0] = parts[q][0] + (parts[q][1] + lo_g);
    d[q][1] = parts[q][2] + (parts[q][3] + lo_g8);
  }
}

// Σ x² of the lane's row over the span: each lane its 8 columns in order, then a butterfly over
// the 4 lanes of the row (t) with offsets 1 then 2, the order that defines every HC-pre kernel's
// bits (butterfly_sum<4> adds in the other order); every lane gets its row's value.
__device__ __forceinline__ float span_squares(const LaneInputs& x) {
  float squares = 0.0f;
#pragma unroll
  for (int j = 0; j < kLaneColumns; ++j) squares = fmaf(x.v[j], x.v[j], squares);
  squares += __shfl_xor_sync(kFullWarpMask, squares, 1);
  squares += __shfl_xor_sync(kFullWarpMask, squares, 2);
  return squares;
}

// A half's value: its four spans in span order (v[s · span_stride]).
__device__ __forceinline__ float half_total(const float* v, int span_stride) {
  return ((v[0] + v[span_stride]) + v[2 * span_stride]) + v[3 * span_stride];
}

// A warp's span of one chunk for a group of up to kRows rows, from the lane's raw F16 weights of
// outputs g, g + 8 and 16 + g and its 8 inputs of row g: stores D(k, row) for those outputs and
// rows 2t, 2t + 1 at out[row][k], and row g's sum of squares at out[g][kEntries − 1]. A single
// row (kRows = 1) takes the packed MMAs: its inputs in lane groups 0 .. kPackedParts − 1
// (span_input_row).
template <int kRows, int kEntries>
__device__ __forceinline__ void store_span_entries(const uint4 (&weights)[3], const LaneInputs& x,
                                                   float (*out)[kEntries]) {
  static_assert(kEntries == kTileOutputs + 8 + 1, "outputs g, g + 8, 16 + g and the squares");
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  LaneWeights w = {};
  widen_lane_weights(weights[0], w.v[0][0]);
  widen_lane_weights(weights[1], w.v[0][1]);
  widen_lane_weights(weights[2], w.v[1][0]);
  const float squares = span_squares(x);
  if constexpr (kRows == 1) {  // x of the row in lane groups 0 .. kPackedParts − 1
    float d[kRoundTiles][2];
    span_products_packed(w, split_inputs(x), d);
    if (t == 0) {
      out[0][g] = d[0][0];
      out[0][g + 8] = d[0][1];
      out[0][kTileOutputs + g] = d[1][0];
      if (g == 0) out[0][kEntries - 1] = squares;
    }
  } else {
    float d[kRoundTiles][4];
    span_products(w, split_inputs(x), true, d);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int row = 2 * t + c;
      if (row < kRows) {
        out[row][g] = d[0][c];
        out[row][g + 8] = d[0][2 + c];
        out[row][kTileOutputs + g] = d[1][c];
      }
    }
    if (t == 0 && g < kRows) out[g][kEntries - 1] = squares;
  }
}

// An entry of a row from its chunk totals, chunk_total(c) for c < chunks ≤ 96, in the grid
// kernel's order: lane l of a warp adds chunks l, l + 32, l + 64 in order, and warp_sum's
// butterfly adds the lanes. One thread does lane 0's additions (the cluster kernels, which hold
// the chunk totals in shared memory).
inline constexpr int kCombineLoads = 3;

template <class ChunkTotal>
__device__ __forceinline__ float combine_in_lane_order(int chunks, ChunkTotal chunk_total) {
  float lanes[kWarpSize];
#pragma unroll
  for (int l = 0; l < kWarpSize; ++l) {
    float total = 0.0f;
#pragma unroll
    for (int j = 0; j < kCombineLoads; ++j) {
      const int c = l + j * kWarpSize;
      if (c < chunks) total += chunk_total(c);
    }
    lanes[l] = total;
  }
  // Offsets 16, 8, 4, 2, 1, each loop with a constant count (so that lanes stays in registers).
#pragma unroll
  for (int l = 0; l < 16; ++l) lanes[l] += lanes[l + 16];
#pragma unroll
  for (int l = 0; l < 8; ++l) lanes[l] += lanes[l + 8];
#pragma unroll
  for (int l = 0; l < 4; ++l) lanes[l] += lanes[l + 4];
  lanes[0] += lanes[2];
  lanes[1] += lanes[3];
  return lanes[0] + lanes[1];
}

// Mix output k of a row from its combined totals: ρ · total_k, ρ the RMSNorm scale of the whole
// n·E row (the spec's Σ W·(x·ρ), with ρ applied to the finished sum).
__device__ __forceinline__ float mix_output(const hc::NormMixArgs& a, float total,
                                            float total_squares) {
  return hc_rms_scale(total_squares, a.n_hc * a.embd, a.eps) * total;
}

}  // namespace turbodecode::cuda
