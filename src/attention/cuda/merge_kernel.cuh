// The merge kernel of decode attention: one block per output row (query, head) folds the row's
// split states with the associative merge of SPEC §2.5 (state.h), normalises, and for TQ V
// un-rotates (R_D⁻¹) unless the caller asked for the rotated result.
//
// The merge is a chain of dependent steps on a few blocks, so it is built for latency:
// - each of the 16 warps folds its own splits (w, w + 16, …) against its own max, so a warp
//   issues the loads of its states and of its first partial rows together, without waiting
//   for the row's max;
// - the warps' states are then folded in warp order, one block barrier;
// - R_D⁻¹ runs in one warp, the row held as D/32 consecutive elements per lane (warp_row.cuh,
//   as the codec kernels): no barriers.
// It is a dependent launch of the split kernel: its blocks start and resolve their query while
// the split kernel's last blocks run, and wait for that grid before reading any state.
// Every sum runs in a fixed order: the result is deterministic.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "attention/cuda/decode_params.cuh"
#include "attention/state.h"
#include "common/cuda/dependent_launch.cuh"
#include "tq/cuda/warp_row.cuh"

namespace turbodecode::cuda::decode {

inline constexpr int kMergeWarps = 16;
inline constexpr int kMergeThreads = kMergeWarps * 32;
// States of one warp's splits per lane: kMaxSplits / kMergeWarps / 32.
inline constexpr int kStatesPerLane = kMaxSplits / kMergeThreads;
static_assert(kStatesPerLane * kMergeThreads == kMaxSplits, "whole state batches");
// Partial rows a warp loads before it adds them (registers: 512 threads allow 128 each).
inline constexpr int kRowsInFlight = 4;

// The state of one warp's splits (relative to the warp's own max) and its slice of O.
template <int D>
struct WarpFold {
  float m = -INFINITY;
  float l = 0.0f;
  float o[D / 32] = {};
};

// Folds splits w, w + kMergeWarps, … (w = this warp) of a row: lane l holds D/32 consecutive
// elements. The weights stay in the lanes that loaded the states and reach the others by
// shuffles; rows are added in split order.
template <int D>
__device__ __forceinline__ WarpFold<D> fold_warp_splits(const float2* states,
                                                        const float* partial_rows, int splits) {
  constexpr int kLaneFloats = D / 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int count = splits > warp ? (splits - warp + kMergeWarps - 1) / kMergeWarps : 0;

  float2 state[kStatesPerLane];
#pragma unroll
  for (int b = 0; b < kStatesPerLane; ++b) {
    const int k = lane + 32 * b;
    state[b] = k < count ? states[warp + k * kMergeWarps] : make_float2(-INFINITY, 0.0f);
  }
  WarpFold<D> fold;
  float4 rows[kRowsInFlight][kLaneFloats / 4];
  const auto load_rows = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      if (k0 + i < count) {
        const auto* row = reinterpret_cast<const float4*>(
            partial_rows + static_cast<std::int64_t>(warp + (k0 + i) * kMergeWarps) * D +
            lane * kLaneFloats);
#pragma unroll
        for (int v = 0; v < kLaneFloats / 4; ++v) rows[i][v] = row[v];
      }
    }
  };
  load_rows(0);  // independent of the max: in flight with the states

#pragma unroll
  for (int b = 0; b < kStatesPerLane; ++b) fold.m = fmaxf(fold.m, state[b].x);
#pragma unroll
  for (int offset = 16; offset >= 1; offset /= 2) {
    fold.m = fmaxf(fold.m, __shfl_xor_sync(0xffffffffu, fold.m, offset));
  }
  float weight[kStatesPerLane];
  float l = 0.0f;
#pragma unroll
  for (int b = 0; b < kStatesPerLane; ++b) {
    weight[b] = attention::merge_weight(state[b].x, fold.m);
    l = fmaf(state[b].y, weight[b], l);
  }
#pragma unroll
  for (int offset = 16; offset >= 1; offset /= 2) {
    l += __shfl_xor_sync(0xffffffffu, l, offset);
  }
  fold.l = l;

  for (int k0 = 0; k0 < count; k0 += kRowsInFlight) {
    if (k0 > 0) load_rows(k0);
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      const int k = k0 + i;
      if (k >= count) break;
      float w = weight[0];
#pragma unroll
      for (int b = 1; b < kStatesPerLane; ++b) w = k >= 32 * b ? weight[b] : w;
      w = __shfl_sync(0xffffffffu, w, k % 32);
#pragma unroll
      for (int v = 0; v < kLaneFloats / 4; ++v) {
        fold.o[4 * v] = fmaf(rows[i][v].x, w, fold.o[4 * v]);
        fold.o[4 * v + 1] = fmaf(rows[i][v].y, w, fold.o[4 * v + 1]);
        fold.o[4 * v + 2] = fmaf(rows[i][v].z, w, fold.o[4 * v + 2]);
        fold.o[4 * v + 3] = fmaf(rows[i][v].w, w, fold.o[4 * v + 3]);
      }
    }
  }
  return fold;
}

template <int D>
__global__ void __launch_bounds__(kMergeThreads)
    merge_kernel(const __grid_constant__ DecodeParams p) {
  constexpr int kLaneFloats = D / 32;
  __shared__ float2 warp_states[kMergeWarps];
  __shared__ __align__(16) float warp_rows[kMergeWarps][D];
  __shared__ __align__(16) float row[D];
  const std::int64_t query = blockIdx.x / p.n_heads;
  const int head = static_cast<int>(blockIdx.x % p.n_heads);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  float* out = p.out + query * p.out_stride[0] + head * p.out_stride[1];

  const QueryRows rows = resolve_query(p, query);
  if (!rows.valid) {  // whole block: an index the host could not check (graph capture)
    for (int d = tid; d < D; d += kMergeThreads) out[d] = NAN;
    return;
  }
  wait_for_prior_grids();  // the split kernel's states
  const std::int64_t state_base = (query * p.n_heads + head) * p.max_splits;
  const WarpFold<D> fold =
      fold_warp_splits<D>(p.partial_ml + state_base, p.partial_o + state_base * D, rows.splits);
#pragma unroll
  for (int e = 0; e < kLaneFloats; e += 4) {
    *reinterpret_cast<float4*>(&warp_rows[warp][lane * kLaneFloats + e]) =
        make_float4(fold.o[e], fold.o[e + 1], fold.o[e + 2], fold.o[e + 3]);
  }
  if (lane == 0) warp_states[warp] = make_float2(fold.m, fold.l);
  __syncthreads();

  // The warps' states in warp order: every thread folds the same 16 values.
  float m = -INFINITY;
#pragma unroll
  for (int w = 0; w < kMergeWarps; ++w) m = fmaxf(m, warp_states[w].x);
  float scale[kMergeWarps];
  float l = 0.0f;
#pragma unroll
  for (int w = 0; w < kMergeWarps; ++w) {
    scale[w] = attention::merge_weight(warp_states[w].x, m);
    l = fmaf(warp_states[w].y, scale[w], l);
  }
  const float normaliser = attention::output_scale(l);
  for (int d = tid; d < D; d += kMergeThreads) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kMergeWarps; ++w) sum = fmaf(warp_rows[w][d], scale[w], sum);
    if (p.unrotate_output) {
      row[d] = sum * normaliser;
    } else {
      out[d] = sum * normaliser;
    }
  }
  if (!p.unrotate_output) return;
  __syncthreads();
  if (warp != 0) return;
  float v[kLaneFloats];
#pragma unroll
  for (int e = 0; e < kLaneFloats; e += 4) {
    const float4 x = *reinterpret_cast<const float4*>(&row[lane * kLaneFloats + e]);
    v[e] = x.x;
    v[e + 1] = x.y;
    v[e + 2] = x.z;
    v[e + 3] = x.w;
  }
  warp_row::rotate_inverse<D>(v, lane, warp_row::lane_sign_bits<D>(lane));
#pragma unroll
  for (int e = 0; e < kLaneFloats; ++e) {  // scalar stores: `out` may be any strided view
    out[lane * kLaneFloats + e] = v[e];
  }
}

template <int D>
void launch_merge_kernel(const DecodeParams& p, std::int64_t n_queries, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(n_queries * p.n_heads);
  launch_dependent(merge_kernel<D>, dim3(blocks), dim3(kMergeThreads), 0, stream, p);
}

}  // namespace turbodecode::cuda::decode
