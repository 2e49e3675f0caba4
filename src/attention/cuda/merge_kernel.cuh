// The merge kernel of decode attention: one block per output row (query, head) folds the row's
// split states with the associative merge of SPEC §2.5 (state.h), normalises, and for TQ V
// un-rotates (R_D⁻¹) in shared memory unless the caller asked for the rotated result.
//
// A long query has hundreds of splits, so the splits are spread over the block's 8 warps
// (each warp streams whole partial rows, several in flight) rather than walked one after
// another. Every sum runs in a fixed order: the result is deterministic.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/rotation.cuh"
#include "attention/state.h"
#include "common/cuda_check.cuh"
#include "tq/codec_math.h"

namespace turbodecode::cuda::decode {

inline constexpr int kMergeWarps = 8;
inline constexpr int kMergeThreads = kMergeWarps * 32;

// Reduces one value per thread over the block; every thread gets the result. `scratch` holds
// kMergeWarps floats; the warps' results are combined in warp order.
template <class Op>
__device__ __forceinline__ float block_reduce(float value, Op op, float* scratch) {
#pragma unroll
  for (int offset = 16; offset >= 1; offset /= 2) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  float result = scratch[0];
#pragma unroll
  for (int w = 1; w < kMergeWarps; ++w) result = op(result, scratch[w]);
  __syncthreads();  // scratch may be reused at once
  return result;
}

// Σ_j weights[j] · O_j over the splits j ≡ warp (mod kMergeWarps), lane's D/32 elements.
template <int D>
__device__ __forceinline__ void accumulate_warp_splits(const float* partial_rows, int splits,
                                                       const float* weights, float (&o)[D / 32]) {
  constexpr int kLaneFloats = D / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll 4
  for (int j = static_cast<int>(threadIdx.x) / 32; j < splits; j += kMergeWarps) {
    const float weight = weights[j];
    const auto* part = reinterpret_cast<const float4*>(
        partial_rows + static_cast<std::int64_t>(j) * D + lane * kLaneFloats);
#pragma unroll
    for (int v = 0; v < kLaneFloats / 4; ++v) {
      const float4 x = part[v];
      o[4 * v] = fmaf(x.x, weight, o[4 * v]);
      o[4 * v + 1] = fmaf(x.y, weight, o[4 * v + 1]);
      o[4 * v + 2] = fmaf(x.z, weight, o[4 * v + 2]);
      o[4 * v + 3] = fmaf(x.w, weight, o[4 * v + 3]);
    }
  }
}

template <int D>
__global__ void __launch_bounds__(kMergeThreads)
    merge_kernel(const __grid_constant__ DecodeParams p) {
  constexpr int kLaneFloats = D / 32;
  __shared__ float weights[kMaxSplits];
  __shared__ __align__(16) float warp_sums[kMergeWarps][D];
  __shared__ float row[D];
  __shared__ float scratch[kMergeWarps];
  const std::int64_t query = blockIdx.x / p.n_heads;
  const int head = static_cast<int>(blockIdx.x % p.n_heads);
  const int tid = static_cast<int>(threadIdx.x);
  float* out = p.out + query * p.out_stride[0] + head * p.out_stride[1];

  const QueryRows rows = resolve_query(p, query);
  if (!rows.valid) {  // whole block: an index the host could not check (graph capture)
    for (int d = tid; d < D; d += kMergeThreads) out[d] = NAN;
    return;
  }
  const std::int64_t state_base = (query * p.n_heads + head) * p.max_splits;
  const float2* states = p.partial_ml + state_base;
  float m = -INFINITY;
  for (int j = tid; j < rows.splits; j += kMergeThreads) m = fmaxf(m, states[j].x);
  m = block_reduce(
      m, [](float a, float b) { return fmaxf(a, b); }, scratch);
  float l = 0.0f;
  for (int j = tid; j < rows.splits; j += kMergeThreads) {
    const float weight = attention::merge_weight(states[j].x, m);
    weights[j] = weight;
    l = fmaf(states[j].y, weight, l);
  }
  l = block_reduce(
      l, [](float a, float b) { return a + b; }, scratch);  // also orders weights

  float o[kLaneFloats] = {};
  accumulate_warp_splits<D>(p.partial_o + state_base * D, rows.splits, weights, o);
  const int lane = tid % 32;
#pragma unroll
  for (int e = 0; e < kLaneFloats; ++e) warp_sums[tid / 32][lane * kLaneFloats + e] = o[e];
  __syncthreads();

  const float normaliser = attention::output_scale(l);
  for (int d = tid; d < D; d += kMergeThreads) {
    float sum = warp_sums[0][d];
#pragma unroll
    for (int w = 1; w < kMergeWarps; ++w) sum += warp_sums[w][d];
    if (p.unrotate_output) {
      row[d] = sum * normaliser;
    } else {
      out[d] = sum * normaliser;
    }
  }
  if (!p.unrotate_output) return;
  // R_D⁻¹(y) = s ⊙ (H_D·y / √D).
  block_hadamard(row, 1, D);
  for (int d = tid; d < D; d += kMergeThreads) {
    out[d] = tq::apply_sign(row[d] * tq::rotation_scale(D), sign_flipped(d));
  }
}

template <int D>
void launch_merge_kernel(const DecodeParams& p, std::int64_t n_queries, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(n_queries * p.n_heads);
  merge_kernel<D><<<blocks, kMergeThreads, 0, stream>>>(p);
  TD_CUDA_CHECK_LAUNCH("merge_kernel");
}

}  // namespace turbodecode::cuda::decode
