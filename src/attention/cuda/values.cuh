// The V side of the split kernel: O_h ← O_h · rescale_h + Σ_t w_h,t · v_t over one staged tile,
// every V row decoded once for all query heads of the block. The softmax threads store the
// weights (TQ V: with the row's decode scale folded in, so v_t is the plain codebook value)
// through store_weight, in the layout the accumulator reads. Two ways, picked by SplitShape:
//   FmaValues: CUDA cores. A thread owns E = D/128 consecutive elements of every head's O and
//     adds one FMA per element, head and position.
//   MmaValues (one-byte TQ V codes, two or more heads): tensor cores. Per 16 positions a warp
//     computes Oᵀ[its quarter of D × 8 heads] += Vᵀ · Pᵀ with mma.sync m16n8k16 in bf16 with
//     f32 accumulators. The lane table holds each codebook value split into bf16 high and low
//     parts (one 32-bit word), the weights are split the same way, and three products (hi·hi,
//     hi·lo, lo·hi) keep about 16 bits of each operand: relative error ~2^-15 per product,
//     far inside the 2e-3 of SPEC §5. Per element and position a lane spends a byte permute,
//     an address, a lookup and half a pack, instead of one FMA per head.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "attention/cuda/codebook_lookup.cuh"
#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/row_access.cuh"
#include "attention/cuda/split_shape.h"
#include "common/cuda/mma_m16n8k16.cuh"

namespace turbodecode::cuda::decode {

// How the V pass looks up codes: bank-replicated for one byte per code, where random 8-bit
// codes would otherwise conflict.
template <VLookup kLookup, int kCopies>
using CodebookFor =
    std::conditional_t<kLookup == VLookup::lane, LaneCodebook<kCopies>, PlainCodebook>;

template <int D, int kHeads, RowCodec KC, RowCodec VC>
class FmaValues {
 public:
  static constexpr SplitShape kShape{D, kHeads, KC, VC};
  static constexpr int E = kShape.lane_elements;

  __device__ FmaValues(const float* codebook, const LaneSlice& slice)
      : slice_(slice), codebook_(make_codebook(codebook, slice)) {
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
#pragma unroll
      for (int e = 0; e < E; ++e) o_[h][e] = 0.0f;
    }
  }

  // Weight of pair i (head i / T, position i % T) of weight set `set`.
  __device__ static void store_weight(float* weights, int set, int i, float weight) {
    weights[set * kShape.pairs + i] = weight;
  }

  __device__ void accumulate(const unsigned char* stage, const float* weights,
                             const float* rescale) {
    constexpr int T = kShape.tile;
    const float* lane_weights = weights + (kShape.weight_sets > 1 ? slice_.part * kShape.pairs : 0);
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      const float factor = rescale[h];
#pragma unroll
      for (int e = 0; e < E; ++e) o_[h][e] *= factor;
    }
#pragma unroll
    for (int t = 0; t < T; t += 4) {
      float4 w[kHeads];
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        w[h] = *reinterpret_cast<const float4*>(lane_weights + h * T + t);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        float v[E];
        row_elements<VC, E>(stage + kShape.stage_v + (t + u) * kShape.v_pitch, slice_.first,
                            codebook_, 1.0f, v);
#pragma unroll
        for (int h = 0; h < kHeads; ++h) {
          const float weight = u == 0 ? w[h].x : u == 1 ? w[h].y : u == 2 ? w[h].z : w[h].w;
#pragma unroll
          for (int e = 0; e < E; ++e) o_[h][e] = fmaf(weight, v[e], o_[h][e]);
        }
      }
    }
  }

  // Stores the unnormalised O slices of the first heads_here heads; `out` is head 0's row.
  __device__ void write(float* out, std::int64_t head_stride, int heads_here) const {
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      if (h >= heads_here) break;
      float* dst = out + h * head_stride + slice_.first;
      if constexpr (E == 4) {
        *reinterpret_cast<float4*>(dst) = make_float4(o_[h][0], o_[h][1], o_[h][2], o_[h][3]);
      } else {
        *reinterpret_cast<float2*>(dst) = make_float2(o_[h][0], o_[h][1]);
      }
    }
  }

 private:
  using Codebook = CodebookFor<kShape.v_lookup, kShape.v_copies>;

  __device__ static Codebook make_codebook(const float* table, const LaneSlice& slice) {
    if constexpr (kShape.v_lookup == VLookup::lane) {
      return Codebook(table, slice.lane);
    } else {
      return PlainCodebook{table};
    }
  }

  LaneSlice slice_;
  Codebook codebook_;
  float o_[kHeads][E];
};

// A value split into bf16 high and low parts, high in bits 0-15 and low in bits 16-31: the
// lane table's entries and the stored weights of MmaValues.
__device__ __forceinline__ unsigned bf16_pair(float value) {
  const __nv_bfloat16 high = __float2bfloat16_rn(value);
  const __nv_bfloat16 low = __float2bfloat16_rn(value - __bfloat162float(high));
  return static_cast<unsigned>(__bfloat16_as_ushort(high)) |
         (static_cast<unsigned>(__bfloat16_as_ushort(low)) << 16);
}

template <int D, int kHeads, RowCodec KC, RowCodec VC>
class MmaValues {
 public:
  static constexpr SplitShape kShape{D, kHeads, KC, VC};
  static_assert(kShape.v_lookup == VLookup::lane && kShape.tile % 16 == 0 && kHeads <= 8,
                "one-byte codes, whole 16-position blocks, at most 8 heads");
  static constexpr int kQuarter = D / kSplitWarps;  // elements of a warp
  static constexpr int kBlocks = kQuarter / 16;     // mma row blocks of a warp
  // Elements of a lane group (lanes 4g … 4g+3): row g of block b is element 2b of the group's
  // run, row g + 8 element 2b + 1, so a lane reads its codes of one position in one load.
  static constexpr int kRun = 2 * kBlocks;
  static_assert(kRun == 8 || kRun == 16, "one 8- or 16-byte load per position");

  __device__ MmaValues(const float* codebook, const LaneSlice& slice)
      : codebook_(codebook, slice.lane),
        group_(slice.lane / 4),
        pair_(slice.lane % 4),
        run_first_(slice.warp * kQuarter + group_ * kRun),
        weight_set_(kShape.weight_sets > 1 ? slice.part : 0) {
#pragma unroll
    for (int b = 0; b < kBlocks; ++b) {
#pragma unroll
      for (int j = 0; j < 4; ++j) c_[b][j] = 0.0f;
    }
  }

  // Weight of pair i (head h = i / T, position t = i % T) of weight set `set`, as bf16 high and
  // low halves: the high parts of a set are a [head][position] array of 16-bit values, the low
  // parts follow, so a lane's B fragment (two adjacent positions of one head) is one word.
  __device__ static void store_weight(float* weights, int set, int i, float weight) {
    const unsigned pair = bf16_pair(weight);
    auto* halves = reinterpret_cast<unsigned short*>(weights + set * kShape.pairs);
    halves[i] = static_cast<unsigned short>(pair);
    halves[kShape.pairs + i] = static_cast<unsigned short>(pair >> 16);
  }

  __device__ void accumulate(const unsigned char* stage, const float* weights,
                             const float* rescale) {
    constexpr int T = kShape.tile;
    // C fragment: c[b][0, 1] are heads 2·pair, 2·pair + 1 of run element 2b; c[b][2, 3] of
    // element 2b + 1. Heads past kHeads hold zeros (their weights are zero) and keep them.
    const int head = 2 * pair_;
    const float factor0 = head < kHeads ? rescale[head] : 1.0f;
    const float factor1 = head + 1 < kHeads ? rescale[head + 1] : 1.0f;
    // Most tiles leave every head's max where it was (factor 1, an exact no-op): skip the
    // multiplies unless some lane of the warp needs them.
    if (__any_sync(0xffffffffu, factor0 != 1.0f || factor1 != 1.0f)) {
#pragma unroll
      for (int b = 0; b < kBlocks; ++b) {
        c_[b][0] *= factor0;
        c_[b][1] *= factor1;
        c_[b][2] *= factor0;
        c_[b][3] *= factor1;
      }
    }
    const auto* halves =
        reinterpret_cast<const unsigned short*>(weights + weight_set_ * kShape.pairs);
#pragma unroll
    for (int k = 0; k < T / 16; ++k) {
      // B fragments: head group_, positions 2·pair, 2·pair + 1 (word 0) and + 8 (word 1).
      unsigned high[2] = {0u, 0u};
      unsigned low[2] = {0u, 0u};
      if (group_ < kHeads) {
        const int at = group_ * T + k * 16 + 2 * pair_;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          high[r] = *reinterpret_cast<const unsigned*>(halves + at + 8 * r);
          low[r] = *reinterpret_cast<const unsigned*>(halves + kShape.pairs + at + 8 * r);
        }
      }
      // The lane's codes at positions 2·pair, 2·pair + 1, 2·pair + 8, 2·pair + 9 of the block.
      const unsigned char* rows =
          stage + kShape.stage_v + (k * 16 + 2 * pair_) * kShape.v_pitch + run_first_;
      unsigned codes[4][kRun / 4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned char* row = rows + ((j & 1) + 8 * (j >> 1)) * kShape.v_pitch;
        if constexpr (kRun == 16) {
          const uint4 words = *reinterpret_cast<const uint4*>(row);
          codes[j][0] = words.x;
          codes[j][1] = words.y;
          codes[j][2] = words.z;
          codes[j][3] = words.w;
        } else {
          const uint2 words = *reinterpret_cast<const uint2*>(row);
          codes[j][0] = words.x;
          codes[j][1] = words.y;
        }
      }
#pragma unroll
      for (int b = 0; b < kBlocks; ++b) {
        // Table words of run elements 2b (even) and 2b + 1 (odd) at the four positions.
        unsigned even[4], odd[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const unsigned word = codes[j][b / 2];
          const unsigned byte = 2 * (b % 2);
          even[j] = codebook_.word(__byte_perm(word, 0u, 0x4440u | byte));
          odd[j] = codebook_.word(__byte_perm(word, 0u, 0x4440u | (byte + 1)));
        }
        // A fragments: rows g (even), g + 8 (odd); columns 2·pair, 2·pair + 1 (j = 0, 1) and
        // + 8 (j = 2, 3); the lower column in the lower half.
        const unsigned a_high[4] = {
            __byte_perm(even[0], even[1], 0x5410u), __byte_perm(odd[0], odd[1], 0x5410u),
            __byte_perm(even[2], even[3], 0x5410u), __byte_perm(odd[2], odd[3], 0x5410u)};
        const unsigned a_low[4] = {
            __byte_perm(even[0], even[1], 0x7632u), __byte_perm(odd[0], odd[1], 0x7632u),
            __byte_perm(even[2], even[3], 0x7632u), __byte_perm(odd[2], odd[3], 0x7632u)};
        mma_m16n8k16<__nv_bfloat16>(c_[b], a_high, high);
        mma_m16n8k16<__nv_bfloat16>(c_[b], a_high, low);
        mma_m16n8k16<__nv_bfloat16>(c_[b], a_low, high);
      }
    }
  }

  // Stores the unnormalised O slices of the first heads_here heads; `out` is head 0's row.
  // Lane (g, pair) holds heads 2·pair and 2·pair + 1 of the kRun elements of its group.
  __device__ void write(float* out, std::int64_t head_stride, int heads_here) const {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int head = 2 * pair_ + j;
      if (head >= heads_here) continue;
      float* dst = out + head * head_stride + run_first_;
#pragma unroll
      for (int b = 0; b < kBlocks; b += 2) {
        *reinterpret_cast<float4*>(dst + 2 * b) =
            make_float4(c_[b][j], c_[b][2 + j], c_[b + 1][j], c_[b + 1][2 + j]);
      }
    }
  }

 private:
  LaneCodebook<kShape.v_copies> codebook_;
  int group_, pair_;
  int run_first_;   // first element of the lane group's run
  int weight_set_;  // D = 512: the half (and norm) of the warp's quarter
  float c_[kBlocks][4];
};

template <int D, int kHeads, RowCodec KC, RowCodec VC>
using TileValues = std::conditional_t<SplitShape(D, kHeads, KC, VC).tensor_core_values,
                                      MmaValues<D, kHeads, KC, VC>, FmaValues<D, kHeads, KC, VC>>;

}  // namespace turbodecode::cuda::decode
