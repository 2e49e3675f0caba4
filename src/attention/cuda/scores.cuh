// Scores of one staged tile in the decode kernel, on tensor cores for every K format: each warp
// computes partial dot products of the block's query columns with the tile's K rows over its
// quarter of the head dimension, mma.sync m16n8k16 with 16 K rows as A and 8 query columns as
// B, and stores them at partial[warp · pairs + column · T + position]; the softmax combines
// the quarters with the rows' scales in a fixed order (kernel).
//
// The mma's k dimension may take the head-dim elements in any order as long as A and B agree
// (a dot product does not care). F16 rows keep the natural order (lane i: elements 2i, 2i + 1,
// 2i + 8, 2i + 9 of a step); FP8 and TQ rows give lane i the four consecutive elements
// 4i … 4i + 3, whose codes are one 4- (or 2-) byte load. Staged K rows lie 16 bytes more than a
// row apart (decode_shape.h), so the 8 rows of a fragment load hit distinct banks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/cuda/cache_rows.cuh"
#include "attention/cuda/codebook_lookup.cuh"
#include "attention/cuda/decode_shape.h"
#include "common/cuda/mma_m16n8k16.cuh"

namespace turbodecode::cuda::decode {

__device__ __forceinline__ unsigned pack_halves(float low, float high) {
  const __half2 pair = __floats2half2_rn(low, high);
  return *reinterpret_cast<const unsigned*>(&pair);
}

__device__ __forceinline__ unsigned pack_bf16(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const unsigned*>(&pair);
}

// Two E4M3 bytes (the lower element in the low byte) as an f16 pair, exactly.
__device__ __forceinline__ unsigned e4m3x2_to_f16x2(unsigned two_bytes) {
  unsigned result;
  const unsigned short bits = static_cast<unsigned short>(two_bytes);
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(result) : "h"(bits));
  return result;
}

// Where the query columns of a task come from: column c < count is query row row[c], head
// head[c]; the others (padding) are zero.
struct QueryColumns {
  int count;
  int row[kMaxColumns];
  int head[kMaxColumns];
};

// B fragments of the query columns (lane: group g = lane / 4 is column g, i = lane % 4), split
// into high and low 16-bit parts. `element(k)` maps the r-th pair of a lane's step to head-dim
// elements; `value(column, e)` reads the (rotated, scaled) query element.
template <int D, class Half>
struct QueryFragments {
  static constexpr int kSteps = D / kComputeWarps / 16;
  unsigned high[kSteps][2];
  unsigned low[kSteps][2];

  template <class FirstElement, class Value>
  __device__ void load(int column, bool present, FirstElement first_element, Value value) {
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int e = first_element(step, r);
        const float x0 = present ? value(column, e) : 0.0f;
        const float x1 = present ? value(column, e + 1) : 0.0f;
        if constexpr (std::is_same_v<Half, __half>) {
          const float h0 = __half2float(__float2half_rn(x0));
          const float h1 = __half2float(__float2half_rn(x1));
          high[step][r] = pack_halves(x0, x1);
          low[step][r] = pack_halves(x0 - h0, x1 - h1);
        } else {
          const float h0 = __bfloat162float(__float2bfloat16_rn(x0));
          const float h1 = __bfloat162float(__float2bfloat16_rn(x1));
          high[step][r] = pack_bf16(x0, x1);
          low[step][r] = pack_bf16(x0 - h0, x1 - h1);
        }
      }
    }
  }
};

// Stores one 16-position block's accumulators: c[j] is position g, column 2i + j; c[2 + j]
// position g + 8.
template <int kColumns, int T>
__device__ __forceinline__ void store_block(float* partial, int warp, int lane, int block,
                                            const float (&c)[4]) {
  const int group = lane / 4;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int column = 2 * (lane % 4) + j;
    if (column < kColumns) {
      float* out = partial + warp * kColumns * T + column * T + block * 16 + group;
      out[0] = c[j];
      out[8] = c[2 + j];
    }
  }
}

template <int D, int kColumns, RowFormat KF, RowFormat VF>
class TileScorer {
 public:
  static constexpr DecodeShape kShape{D, kColumns, KF, VF};
  static constexpr KTile kTile = kShape.k_tile;
  static constexpr int kSteps = D / kComputeWarps / 16;
  static constexpr int kQuarter = D / kComputeWarps;
  using Half = std::conditional_t<kTile == KTile::tq, __nv_bfloat16, __half>;
  static_assert(kSteps % 2 == 0, "two chains of steps");

  // q: F16 and FP8 K read the raw query rows from global memory; TQ K reads the block's
  // R_D-rotated rows from shared memory ([kColumns][D]).
  __device__ TileScorer(const DecodeParams& p, const QueryColumns& columns,
                        const float* rotated_q, int warp, int lane)
      : warp_(warp), lane_(lane) {
    const int column = lane / 4;
    const bool present = column < columns.count;
    const int i = lane % 4;
    const auto first_element = [&](int step, int r) {
      return kTile == KTile::f16 ? warp * kQuarter + step * 16 + 2 * i + 8 * r
                                 : warp * kQuarter + step * 16 + 4 * i + 2 * r;
    };
    if constexpr (kTile == KTile::tq) {
      q_.load(column, present, first_element, [&](int c, int e) { return rotated_q[c * D + e]; });
    } else {
      const float* q = present ? p.q + columns.row[column] * p.q_stride[0] +
                                     columns.head[column] * p.q_stride[1]
                               : nullptr;
      q_.load(column, present, first_element, [&](int, int e) { return q[e]; });
    }
  }

  // Lookups of TQ K codes (unused otherwise): `table` is the staged lane table.
  template <class Codebook>
  __device__ void score(const unsigned char* stage, const Codebook& codebook,
                        float* partial) const {
    constexpr int T = kShape.tile;
    const int group = lane_ / 4;
    const int i = lane_ % 4;
#pragma unroll
    for (int block = 0; block < T / 16; ++block) {
      const unsigned char* row = stage + kShape.stage_k + (block * 16 + group) * kShape.k_pitch;
      float chains[2][4] = {};
#pragma unroll
      for (int step = 0; step < kSteps; ++step) {
        unsigned a[2][4];
        const int parts = fragments(row, step, group, i, codebook, a);
        float(&c)[4] = chains[step % 2];
        mma_m16n8k16<Half>(c, a[0], q_.high[step]);
        mma_m16n8k16<Half>(c, a[0], q_.low[step]);
        if (parts == 2) mma_m16n8k16<Half>(c, a[1], q_.high[step]);
      }
      float c[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) c[j] = chains[0][j] + chains[1][j];
      store_block<kColumns, T>(partial, warp_, lane_, block, c);
    }
  }

 private:
  // A fragments (high and, for TQ, low parts) of one step for rows g and g + 8; returns how
  // many parts there are.
  template <class Codebook>
  __device__ int fragments(const unsigned char* row, int step, int group, int i,
                           const Codebook& codebook, unsigned (&a)[2][4]) const {
    const int pitch8 = 8 * kShape.k_pitch;
    if constexpr (kTile == KTile::f16) {
      // Bytes 4i of chunks 2·step and 2·step + 1 of the warp's quarter (2 bytes an element).
      const int first_chunk = warp_ * kQuarter * 2 / 16;
      const unsigned char* low = row + 16 * (first_chunk + 2 * step) + 4 * i;
      const unsigned char* high =
          row + 16 * (first_chunk + 2 * step + 1) + 4 * i;
      a[0][0] = *reinterpret_cast<const unsigned*>(low);
      a[0][1] = *reinterpret_cast<const unsigned*>(low + pitch8);
      a[0][2] = *reinterpret_cast<const unsigned*>(high);
      a[0][3] = *reinterpret_cast<const unsigned*>(high + pitch8);
      return 1;
    } else if constexpr (kTile == KTile::fp8) {
      // Bytes 4i … 4i + 3 of chunk `step` of the quarter: elements 4i … 4i + 3.
      const int chunk = warp_ * kQuarter / 16 + step;
      const unsigned char* at = row + 16 * chunk + 4 * i;
      const unsigned upper = *reinterpret_cast<const unsigned*>(at);
      const unsigned lower = *reinterpret_cast<const unsigned*>(at + pitch8);
      a[0][0] = e4m3x2_to_f16x2(upper);
      a[0][1] = e4m3x2_to_f16x2(lower);
      a[0][2] = e4m3x2_to_f16x2(upper >> 16);
      a[0][3] = e4m3x2_to_f16x2(lower >> 16);
      return 1;
    } else {
      constexpr int kBits = code_bits(KF);
      static_assert(kBits == 8 || kBits == 4, "TQ K of 4 or 8 bits");
      // The codes of elements 4i … 4i + 3: 4 bytes (8-bit) or 2 (4-bit).
      const int byte = (warp_ * kQuarter + step * 16) * kBits / 8 + 4 * i * kBits / 8;
      const unsigned char* at = row + byte;
      unsigned codes[2];
      if constexpr (kBits == 8) {
        codes[0] = *reinterpret_cast<const unsigned*>(at);
        codes[1] = *reinterpret_cast<const unsigned*>(at + pitch8);
      } else {
        codes[0] = *reinterpret_cast<const unsigned short*>(at);
        codes[1] = *reinterpret_cast<const unsigned short*>(at + pitch8);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {  // row g, then g + 8
        unsigned w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          w[e] = codebook.word((codes[r] >> (kBits * e)) & ((1u << kBits) - 1u));
        }
        // Elements 4i, 4i + 1 are columns 2i, 2i + 1 (register r); 4i + 2, 4i + 3 are 2i + 8,
        // 2i + 9 (register 2 + r). High parts in the low halves of the table words.
        a[0][r] = __byte_perm(w[0], w[1], 0x5410u);
        a[0][2 + r] = __byte_perm(w[2], w[3], 0x5410u);
        a[1][r] = __byte_perm(w[0], w[1], 0x7632u);
        a[1][2 + r] = __byte_perm(w[2], w[3], 0x7632u);
      }
      return 2;
    }
  }

  int warp_, lane_;
  QueryFragments<D, Half> q_;
};

}  // namespace turbodecode::cuda::decode
