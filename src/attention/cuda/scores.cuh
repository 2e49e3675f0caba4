// Scores of one staged tile in the split kernel: every warp computes partial dot products
// q_h · k_t over its quarter of the head dimension for all (head h, position t) pairs of the
// tile and stores them at partial[warp · reduce_width + h · T + t]; the softmax sums the four
// quarters in a fixed order. Two ways, picked by the K format:
//   MmaScorer (F16 K): tensor cores, mma.sync m16n8k16 with K rows as A and q as B. q is
//     split into f16 high and low parts (two mma per step), so with exact F16 K and f32
//     accumulation the scores keep f32 accuracy.
//   FmaScorer (TQ K): each thread decodes its elements of the rotated K rows and forms FMA
//     partial sums, summed over the warp by a reduce-scatter.
#pragma once

#include <cuda_fp16.h>

#include <type_traits>

#include "attention/cuda/codebook_lookup.cuh"
#include "attention/cuda/row_access.cuh"
#include "attention/cuda/split_shape.h"
#include "common/cuda/mma_m16n8k16.cuh"
#include "tq/codec_math.h"

namespace turbodecode::cuda::decode {

// Sums each of the N values of every lane over the warp; lane l ends with the totals of
// values [l·N/32, (l+1)·N/32) in v[0..N/32). Each step trades half of the values with the
// partner lane, N − N/32 shuffles in all instead of 5·N for separate reductions.
template <int N, int kBit = 16>
__device__ __forceinline__ void warp_reduce_scatter(float (&v)[N], int lane) {
  static_assert(N >= 32 && (N & (N - 1)) == 0, "a power of two of at least one per lane");
  // Before the step of lane bit kBit, 2·kHalf values are live; the lane keeps one half.
  constexpr int kHalf = N * kBit / 32;
  const bool upper = (lane & kBit) != 0;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float send = upper ? v[i] : v[i + kHalf];
    const float keep = upper ? v[i + kHalf] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kBit);
  }
  if constexpr (kBit > 1) warp_reduce_scatter<N, kBit / 2>(v, lane);
}

template <int D, int kHeads, RowCodec KC, RowCodec VC>
class FmaScorer {
 public:
  static constexpr SplitShape kShape{D, kHeads, KC, VC};
  static constexpr int E = kShape.lane_elements;

  // q_shared: [kHeads][D], already R_D-rotated (without the 1/√D) for TQ K.
  __device__ FmaScorer(const float* q_shared, const LaneSlice& slice) : slice_(slice) {
    const float factor = KC == RowCodec::f16 ? 1.0f : tq::rotation_scale(D);
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
#pragma unroll
      for (int e = 0; e < E; ++e) q_[h][e] = q_shared[h * D + slice.first + e] * factor;
    }
  }

  __device__ void score(const unsigned char* stage, const float* codebook,
                        float inverse_scale_factor_d512, float* partial) const {
    constexpr int T = kShape.tile;
    constexpr int N = kShape.reduce_width;
    const float* norms = reinterpret_cast<const float*>(stage + kShape.stage_k_norms);
    float dots[N];
#pragma unroll
    for (int i = 0; i < N; ++i) dots[i] = 0.0f;
#pragma unroll
    for (int t = 0; t < T; ++t) {
      float row_scale = 1.0f;
      if constexpr (KC != RowCodec::f16) {
        row_scale = decode_scale<D>(norms[t * kShape.norms_per_row + slice_.part],
                                    inverse_scale_factor_d512);
      }
      float k[E];
      row_elements<KC, E>(stage + kShape.stage_k + t * kShape.k_pitch, slice_.first,
                          PlainCodebook{codebook}, row_scale, k);
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
#pragma unroll
        for (int e = 0; e < E; ++e) dots[h * T + t] = fmaf(q_[h][e], k[e], dots[h * T + t]);
      }
    }
    warp_reduce_scatter(dots, slice_.lane);
#pragma unroll
    for (int j = 0; j < N / 32; ++j) {
      partial[slice_.warp * N + slice_.lane * (N / 32) + j] = dots[j];
    }
  }

 private:
  LaneSlice slice_;
  float q_[kHeads][E];
};

__device__ __forceinline__ unsigned pack_halves(__half low, __half high) {
  const __half2 pair = __halves2half2(low, high);
  return *reinterpret_cast<const unsigned*>(&pair);
}

template <int D, int kHeads, RowCodec VC>
class MmaScorer {
 public:
  static constexpr SplitShape kShape{D, kHeads, RowCodec::f16, VC};
  // k-steps of 16 elements in a warp's quarter of the head dimension.
  static constexpr int kSteps = D / kSplitWarps / 16;
  static_assert(kSteps % 2 == 0, "two chains of steps");
  static_assert(kShape.tile % 16 == 0, "mma blocks of 16 positions");

  // B fragments of q: lane (group g = lane / 4, index i = lane % 4) holds head g's elements
  // 2i, 2i+1 (register 0) and 2i+8, 2i+9 (register 1) of each step; heads >= kHeads are 0.
  __device__ MmaScorer(const float* q_shared, const LaneSlice& slice) : slice_(slice) {
    const int head = slice.lane / 4;
    const int column = 2 * (slice.lane % 4);
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int k = slice.warp * (D / kSplitWarps) + step * 16 + column + 8 * r;
        const float x0 = head < kHeads ? q_shared[head * D + k] : 0.0f;
        const float x1 = head < kHeads ? q_shared[head * D + k + 1] : 0.0f;
        const __half h0 = __float2half_rn(x0);
        const __half h1 = __float2half_rn(x1);
        q_high_[step][r] = pack_halves(h0, h1);
        q_low_[step][r] = pack_halves(__float2half_rn(x0 - __half2float(h0)),
                                      __float2half_rn(x1 - __half2float(h1)));
      }
    }
  }

  // A fragments straight from the staged rows: lane (g, i) reads rows g and g + 8 at columns
  // 2i and 2i + 8. Rows are staged with their 16-byte chunks swizzled (chunk c of row r at
  // c ^ (r mod 8): swizzled_chunk), so the 8 rows' words of one load fall in 32 distinct banks.
  __device__ void score(const unsigned char* stage, const float* /*codebook*/,
                        float /*inverse_scale_factor_d512*/, float* partial) const {
    constexpr int T = kShape.tile;
    constexpr int N = kShape.reduce_width;
    const int group = slice_.lane / 4;
    // The warp's first chunk of a row; a lane reads 4 bytes at 4i of chunks 2·step, 2·step + 1.
    const int first_chunk = slice_.warp * (D / kSplitWarps) * 2 / 16;
#pragma unroll
    for (int block = 0; block < T / 16; ++block) {
      // Rows g and g + 8 of the block share r mod 8 = g, so one swizzle serves both.
      const unsigned char* row =
          stage + kShape.stage_k + (block * 16 + group) * kShape.k_pitch + 4 * (slice_.lane % 4);
      // Even and odd steps accumulate apart: two chains of dependent mma, half as long.
      float chains[2][4] = {};
#pragma unroll
      for (int step = 0; step < kSteps; ++step) {
        const unsigned char* low = row + 16 * swizzled_chunk(first_chunk + 2 * step, group);
        const unsigned char* high = row + 16 * swizzled_chunk(first_chunk + 2 * step + 1, group);
        const unsigned a[4] = {*reinterpret_cast<const unsigned*>(low),
                               *reinterpret_cast<const unsigned*>(low + 8 * kShape.k_pitch),
                               *reinterpret_cast<const unsigned*>(high),
                               *reinterpret_cast<const unsigned*>(high + 8 * kShape.k_pitch)};
        mma_m16n8k16<__half>(chains[step % 2], a, q_high_[step]);
        mma_m16n8k16<__half>(chains[step % 2], a, q_low_[step]);
      }
      float c[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) c[j] = chains[0][j] + chains[1][j];
        // c[j]: position group, head 2i + j; c[2 + j]: position group + 8.
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int head = 2 * (slice_.lane % 4) + j;
        if (head < kHeads) {
          float* out = partial + slice_.warp * N + head * T + block * 16 + group;
          out[0] = c[j];
          out[8] = c[2 + j];
        }
      }
    }
  }

 private:
  LaneSlice slice_;
  unsigned q_high_[kSteps][2];
  unsigned q_low_[kSteps][2];
};

template <int D, int kHeads, RowCodec KC, RowCodec VC>
using TileScorer =
    std::conditional_t<KC == RowCodec::f16, MmaScorer<D, kHeads, VC>, FmaScorer<D, kHeads, KC, VC>>;

}  // namespace turbodecode::cuda::decode
