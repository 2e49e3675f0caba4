// The V side of the decode kernel: O_c ← O_c · rescale_c + Σ_t w_c,t · v_t over one staged
// tile, every V row decoded once for all query columns of the block. The softmax threads store
// the weights (with the row's FP8 scale or TQ decode scale folded in, so v_t is the plain
// E4M3 or codebook value) through store_weight, in the layout the accumulator reads. The math
// of each format (tile_formats.h) is fixed by the format alone, never by the number of columns
// a block serves, so a query row's result does not depend on what runs beside it.
//   FmaValues (F16 V): CUDA cores. A thread owns E = D/128 consecutive elements of every
//     column's O and adds one FMA per element, column and position.
//   MmaValues (FP8 and TQ V): tensor cores. Per 16 positions a warp computes
//     Oᵀ[its quarter of D × 8 columns] += Vᵀ · Pᵀ with mma.sync m16n8k16 in bf16 with f32
//     accumulators. Weights are split into bf16 high and low parts; E4M3 values are exact in
//     bf16 (two products), codebook values are split too (three products: hi·hi, hi·lo,
//     lo·hi, relative error about 2^-15 per product).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "attention/cuda/codebook_lookup.cuh"
#include "attention/cuda/decode_shape.h"
#include "common/cuda/mma_m16n8k16.cuh"

namespace turbodecode::cuda::decode {

// Where a thread's elements are in the CUDA-core pass: warp w owns quarter w of the head
// dimension, lane l elements [l·E, l·E + E) of it (E = D / 128).
struct LaneSlice {
  int warp, lane;
  int first;  // first element
  int part;   // the D = 512 half holding the elements

  __device__ LaneSlice(int head_dim, int thread)
      : warp(thread / 32),
        lane(thread % 32),
        first(warp * (head_dim / kComputeWarps) + lane * (head_dim / kComputeThreads)),
        part(first / 256) {}
};

template <int D, int kColumns, RowFormat KF, RowFormat VF>
class FmaValues {
 public:
  static constexpr DecodeShape kShape{D, kColumns, KF, VF};
  static constexpr int E = D / kComputeThreads;

  __device__ FmaValues(const unsigned* /*table*/, int thread) : slice_(D, thread) { reset(); }

  __device__ void reset() {
#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
#pragma unroll
      for (int e = 0; e < E; ++e) o_[c][e] = 0.0f;
    }
  }

  // Weight of pair i (column i / T, position i % T) of weight set `set`.
  __device__ static void store_weight(float* weights, int set, int i, float weight) {
    weights[set * kShape.pairs + i] = weight;
  }

  __device__ void accumulate(const unsigned char* stage, const float* weights,
                             const float* rescale) {
    constexpr int T = kShape.tile;
#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
      const float factor = rescale[c];
#pragma unroll
      for (int e = 0; e < E; ++e) o_[c][e] *= factor;
    }
#pragma unroll
    for (int t = 0; t < T; t += 4) {
      float4 w[kColumns];
#pragma unroll
      for (int c = 0; c < kColumns; ++c) w[c] = *reinterpret_cast<const float4*>(weights + c * T + t);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const unsigned char* row = stage + kShape.stage_v + (t + u) * kShape.v_pitch;
        float v[E];
        __half2 halves[E / 2];
        if constexpr (E == 4) {
          *reinterpret_cast<uint2*>(halves) = *reinterpret_cast<const uint2*>(row + 2 * slice_.first);
        } else {
          halves[0] = *reinterpret_cast<const __half2*>(row + 2 * slice_.first);
        }
#pragma unroll
        for (int i = 0; i < E / 2; ++i) {
          const float2 pair = __half22float2(halves[i]);
          v[2 * i] = pair.x;
          v[2 * i + 1] = pair.y;
        }
#pragma unroll
        for (int c = 0; c < kColumns; ++c) {
          const float weight = u == 0 ? w[c].x : u == 1 ? w[c].y : u == 2 ? w[c].z : w[c].w;
#pragma unroll
          for (int e = 0; e < E; ++e) o_[c][e] = fmaf(weight, v[e], o_[c][e]);
        }
      }
    }
  }

  // Stores the unnormalised O slices of the first `count` columns; column c's row at
  // out + c · D.
  __device__ void write(float* out, int count) const {
#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
      if (c >= count) break;
      float* dst = out + c * D + slice_.first;
      if constexpr (E == 4) {
        *reinterpret_cast<float4*>(dst) = make_float4(o_[c][0], o_[c][1], o_[c][2], o_[c][3]);
      } else {
        *reinterpret_cast<float2*>(dst) = make_float2(o_[c][0], o_[c][1]);
      }
    }
  }

 private:
  LaneSlice slice_;
  float o_[kColumns][E];
};

// The codes of kRun consecutive elements of a packed row (SPEC §1.5: one little-endian bit
// stream), starting at element `first` (a multiple of 8, so the run starts on a byte).
template <int kBits, int kRun>
__device__ __forceinline__ void run_codes(const unsigned char* row, int first,
                                          unsigned (&codes)[kRun]) {
  constexpr int kRunBytes = kRun * kBits / 8;
  constexpr unsigned kMask = (1u << kBits) - 1u;
  const int byte = first * kBits / 8;
  if constexpr (kBits == 8 || kBits == 4) {
    // Runs of whole words, word-aligned.
    constexpr int kWords = kRunBytes / 4;
    unsigned words[kWords];
    if constexpr (kWords == 4) {
      const uint4 w = *reinterpret_cast<const uint4*>(row + byte);
      words[0] = w.x;
      words[1] = w.y;
      words[2] = w.z;
      words[3] = w.w;
    } else if constexpr (kWords == 2) {
      const uint2 w = *reinterpret_cast<const uint2*>(row + byte);
      words[0] = w.x;
      words[1] = w.y;
    } else {
      words[0] = *reinterpret_cast<const unsigned*>(row + byte);
    }
#pragma unroll
    for (int e = 0; e < kRun; ++e) codes[e] = (words[e * kBits / 32] >> (e * kBits % 32)) & kMask;
  } else {
    // 3, 5 and 6 bits: the words holding the run, aligned down, then shifted so the run
    // starts at bit 0 of `stream`.
    constexpr int kWords = (kRunBytes + 3) / 4 + 1;
    const unsigned* aligned = reinterpret_cast<const unsigned*>(row + (byte & ~3));
    unsigned words[kWords];
#pragma unroll
    for (int k = 0; k < kWords; ++k) words[k] = aligned[k];
    const unsigned shift = (byte & 3) * 8;
    unsigned stream[kWords - 1];
#pragma unroll
    for (int k = 0; k + 1 < kWords; ++k) stream[k] = __funnelshift_r(words[k], words[k + 1], shift);
#pragma unroll
    for (int e = 0; e < kRun; ++e) {
      const int bit = e * kBits;
      const int word = bit / 32;
      const int offset = bit % 32;
      unsigned value = stream[word] >> offset;
      if (offset + kBits > 32) value = __funnelshift_r(stream[word], stream[word + 1], offset);
      codes[e] = value & kMask;
    }
  }
}

// Two E4M3 bytes (lower element in the low byte) as a bf16 pair, exactly (every E4M3 value,
// NaN aside, is a bf16 value; NaN stays NaN).
__device__ __forceinline__ unsigned e4m3x2_to_bf16x2(unsigned two_bytes) {
  unsigned halves;
  const unsigned short bits = static_cast<unsigned short>(two_bytes);
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(halves) : "h"(bits));
  const float2 pair = __half22float2(*reinterpret_cast<const __half2*>(&halves));
  const __nv_bfloat162 result = __floats2bfloat162_rn(pair.x, pair.y);
  return *reinterpret_cast<const unsigned*>(&result);
}

template <int D, int kColumns, RowFormat KF, RowFormat VF>
class MmaValues {
 public:
  static constexpr DecodeShape kShape{D, kColumns, KF, VF};
  static constexpr bool kFp8 = kShape.v_tile == VTile::fp8;
  static constexpr int kBits = code_bits(VF);
  static constexpr int kQuarter = D / kComputeWarps;  // elements of a warp
  static constexpr int kBlocks = kQuarter / 16;       // mma row blocks of a warp
  // Elements of a lane group (lanes 4g … 4g+3): row g of block b is element 2b of the group's
  // run, row g + 8 element 2b + 1.
  static constexpr int kRun = 2 * kBlocks;
  static_assert(kShape.tile % 16 == 0, "whole 16-position blocks");
  using Codebook = LaneCodebook<kShape.v_table_copies>;

  __device__ MmaValues(const unsigned* table, int thread)
      : codebook_(table, thread % 32),
        group_(thread % 32 / 4),
        pair_(thread % 4),
        run_first_(thread / 32 * kQuarter + group_ * kRun),
        weight_set_(kShape.weight_sets > 1 ? (thread / 32 * kQuarter) / 256 : 0) {
    reset();
  }

  __device__ void reset() {
#pragma unroll
    for (int b = 0; b < kBlocks; ++b) {
#pragma unroll
      for (int j = 0; j < 4; ++j) c_[b][j] = 0.0f;
    }
  }

  // Weight of pair i (column c = i / T, position t = i % T) of weight set `set`, as bf16 high
  // and low halves: the high parts of a set are a [column][position] array of 16-bit values,
  // the low parts follow, so a lane's B fragment (two adjacent positions of one column) is one
  // word.
  __device__ static void store_weight(float* weights, int set, int i, float weight) {
    const unsigned pair = bf16_pair(weight);
    auto* halves = reinterpret_cast<unsigned short*>(weights + set * kShape.pairs);
    halves[i] = static_cast<unsigned short>(pair);
    halves[kShape.pairs + i] = static_cast<unsigned short>(pair >> 16);
  }

  __device__ void accumulate(const unsigned char* stage, const float* weights,
                             const float* rescale) {
    constexpr int T = kShape.tile;
    // C fragment: c[b][0, 1] are columns 2·pair, 2·pair + 1 of run element 2b; c[b][2, 3] of
    // element 2b + 1. Columns past kColumns hold zeros (their weights are zero) and keep them.
    const int column = 2 * pair_;
    const float factor0 = column < kColumns ? rescale[column] : 1.0f;
    const float factor1 = column + 1 < kColumns ? rescale[column + 1] : 1.0f;
    // Most tiles leave every column's max where it was (factor 1, an exact no-op).
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
      // B fragments: column group_, positions 2·pair, 2·pair + 1 (word 0) and + 8 (word 1).
      unsigned high[2] = {0u, 0u};
      unsigned low[2] = {0u, 0u};
      if (group_ < kColumns) {
        const int at = group_ * T + k * 16 + 2 * pair_;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          high[r] = *reinterpret_cast<const unsigned*>(halves + at + 8 * r);
          low[r] = *reinterpret_cast<const unsigned*>(halves + kShape.pairs + at + 8 * r);
        }
      }
      // The lane's run at positions 2·pair, 2·pair + 1, 2·pair + 8, 2·pair + 9 of the block.
      const unsigned char* rows = stage + kShape.stage_v + (k * 16 + 2 * pair_) * kShape.v_pitch;
      unsigned codes[4][kRun];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        run_codes<kBits, kRun>(rows + ((j & 1) + 8 * (j >> 1)) * kShape.v_pitch, run_first_,
                               codes[j]);
      }
#pragma unroll
      for (int b = 0; b < kBlocks; ++b) {
        // Per position j, run elements 2b (even) and 2b + 1 (odd): bf16 pairs whose low half
        // is the A row g value and high half the row g + 8 value (FP8), or table words whose
        // halves are the high and low parts of one value (TQ).
        unsigned even[4], odd[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if constexpr (kFp8) {
            even[j] = e4m3x2_to_bf16x2(codes[j][2 * b] | (codes[j][2 * b + 1] << 8));
          } else {
            even[j] = codebook_.word(codes[j][2 * b]);
            odd[j] = codebook_.word(codes[j][2 * b + 1]);
          }
        }
        if constexpr (kFp8) {
          // A fragments: rows g (even), g + 8 (odd); columns 2·pair, 2·pair + 1 (j = 0, 1) and
          // + 8 (j = 2, 3).
          const unsigned a[4] = {
              __byte_perm(even[0], even[1], 0x5410u), __byte_perm(even[0], even[1], 0x7632u),
              __byte_perm(even[2], even[3], 0x5410u), __byte_perm(even[2], even[3], 0x7632u)};
          mma_m16n8k16<__nv_bfloat16>(c_[b], a, high);
          mma_m16n8k16<__nv_bfloat16>(c_[b], a, low);
        } else {
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
  }

  // Stores the unnormalised O slices of the first `count` columns; column c's row at
  // out + c · D. Lane (g, pair) holds columns 2·pair, 2·pair + 1 of its group's run.
  __device__ void write(float* out, int count) const {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int column = 2 * pair_ + j;
      if (column >= count) continue;
      float* dst = out + column * D + run_first_;
#pragma unroll
      for (int b = 0; b < kBlocks; b += 2) {
        *reinterpret_cast<float4*>(dst + 2 * b) =
            make_float4(c_[b][j], c_[b][2 + j], c_[b + 1][j], c_[b + 1][2 + j]);
      }
    }
  }

 private:
  Codebook codebook_;
  int group_, pair_;
  int run_first_;   // first element of the lane group's run
  int weight_set_;  // D = 512: the half (and norm) of the warp's quarter
  float c_[kBlocks][4];
};

template <int D, int kColumns, RowFormat KF, RowFormat VF>
using TileValues = std::conditional_t<DecodeShape(D, kColumns, KF, VF).v_tile == VTile::f16,
                                      FmaValues<D, kColumns, KF, VF>,
                                      MmaValues<D, kColumns, KF, VF>>;

}  // namespace turbodecode::cuda::decode
