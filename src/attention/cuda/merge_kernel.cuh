// The merge kernel of decode attention: one block per output row (query, head) folds the row's
// split states with the associative merge of SPEC §2.5 (state.h), normalises, and for TQ V
// un-rotates (R_D⁻¹) in shared memory unless the caller asked for the rotated result.
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

inline constexpr int kMergeThreads = 128;

// E consecutive floats with one vector load (the partial rows are 16-byte aligned).
template <int E>
__device__ __forceinline__ void load_vector(const float* from, float (&to)[E]) {
  static_assert(E == 2 || E == 4, "a thread merges 2 or 4 elements");
  if constexpr (E == 4) {
    const float4 v = *reinterpret_cast<const float4*>(from);
    to[0] = v.x;
    to[1] = v.y;
    to[2] = v.z;
    to[3] = v.w;
  } else {
    const float2 v = *reinterpret_cast<const float2*>(from);
    to[0] = v.x;
    to[1] = v.y;
  }
}

template <int D>
__global__ void __launch_bounds__(kMergeThreads)
    merge_kernel(const __grid_constant__ DecodeParams p) {
  constexpr int E = D / kMergeThreads;
  __shared__ float row[D];
  const std::int64_t query = blockIdx.x / p.n_heads;
  const int head = static_cast<int>(blockIdx.x % p.n_heads);
  const int d0 = static_cast<int>(threadIdx.x) * E;
  float* out = p.out + query * p.out_stride[0] + head * p.out_stride[1] + d0;

  const QueryRows rows = resolve_query(p, query);
  if (!rows.valid) {  // whole block: an index the host could not check (graph capture)
#pragma unroll
    for (int e = 0; e < E; ++e) out[e] = NAN;
    return;
  }
  const std::int64_t state_base = (query * p.n_heads + head) * p.max_splits;
  const float2* states = p.partial_ml + state_base;
  float m = -INFINITY;
  for (int j = 0; j < rows.splits; ++j) m = fmaxf(m, states[j].x);
  float l = 0.0f;
  float o[E] = {};
  for (int j = 0; j < rows.splits; ++j) {
    const float2 state = states[j];
    const float weight = attention::merge_weight(state.x, m);
    l = fmaf(state.y, weight, l);
    float part[E];
    load_vector<E>(p.partial_o + (state_base + j) * D + d0, part);
#pragma unroll
    for (int e = 0; e < E; ++e) o[e] = fmaf(part[e], weight, o[e]);
  }
  const float normaliser = attention::output_scale(l);
#pragma unroll
  for (int e = 0; e < E; ++e) o[e] *= normaliser;

  if (!p.unrotate_output) {
#pragma unroll
    for (int e = 0; e < E; ++e) out[e] = o[e];
    return;
  }
  // R_D⁻¹(y) = s ⊙ (H_D·y / √D).
#pragma unroll
  for (int e = 0; e < E; ++e) row[d0 + e] = o[e];
  block_hadamard(row, 1, D);
#pragma unroll
  for (int e = 0; e < E; ++e) {
    out[e] = tq::apply_sign(row[d0 + e] * tq::rotation_scale(D), sign_flipped(d0 + e));
  }
}

template <int D>
void launch_merge_kernel(const DecodeParams& p, std::int64_t n_queries, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(n_queries * p.n_heads);
  merge_kernel<D><<<blocks, kMergeThreads, 0, stream>>>(p);
  TD_CUDA_CHECK_LAUNCH("merge_kernel");
}

}  // namespace turbodecode::cuda::decode
