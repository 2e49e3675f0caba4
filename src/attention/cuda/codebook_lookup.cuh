// TQ codebooks staged in shared memory for the split kernel, and how a thread turns a code
// into its codebook value. Two layouts:
//   PlainCodebook: entry c at word c. Lanes with random 8-bit codes hit random banks (entries
//     c and c + 32 share one), about 3-4-way conflicts per lookup; fine for the K side of the
//     all-quantized variant and for 4-bit codes (16 entries, one bank each: no conflicts).
//   LaneCodebook<kCopies> (V rows of one byte per code): the table replicated over the banks,
//     entry c of copy r at word c·kCopies + r, lane l reading copy l mod kCopies. With 32
//     copies (32 KB) every lane reads its own bank whatever its code: one wavefront per
//     lookup. With 16 copies (16 KB) lanes l and l + 16 share a copy, and collide when their
//     codes differ in the same half of the banks: about two wavefronts per lookup. SplitShape
//     (split_shape.h) takes 16 copies where the smaller table lets another block onto the SM.
#pragma once

#include "attention/cuda/codebook_layout.h"
#include "attention/cuda/decode_params.cuh"
#include "common/cuda/shared_address.cuh"
#include "tq/cuda/codec_tables.cuh"

namespace turbodecode::cuda::decode {

struct PlainCodebook {
  const float* table;

  __device__ float operator()(unsigned code) const { return table[code]; }
};

template <int kCopies>
struct LaneCodebook {
  static_assert(kCopies == kBanks || kCopies == kBanks / 2, "one copy per bank, or per two");
  unsigned lane_address;  // shared-memory address of this lane's copy in entry 0

  __device__ LaneCodebook(const float* table, int lane)
      : lane_address(shared_address(table + lane % kCopies)) {}

  // Codes arrive masked to 8 bits; entries past the codebook read as 0. From the lane's
  // 32-bit shared address a lookup is one shift-and-add of a zero-extended code (generic
  // indexing took one more instruction). Not volatile: the table is constant once staged, and
  // the code comes from a load issued after that barrier.
  __device__ float operator()(unsigned code) const {
    float value;
    asm("ld.shared.f32 %0, [%1];\n" : "=f"(value) : "r"(lane_address + code * (kCopies * 4)));
    return value;
  }

  // The entry's 32 bits as they are (a table staged as bf16 pairs: see stage_lane_codebook).
  __device__ unsigned word(unsigned code) const {
    unsigned value;
    asm("ld.shared.u32 %0, [%1];\n" : "=r"(value) : "r"(lane_address + code * (kCopies * 4)));
    return value;
  }
};

// Stages the `bits`-wide codebook in the plain layout, by the block's first kThreads threads;
// entries past 2^bits read as 0, so a stray high bit cannot reach uninitialised memory. Needs
// a barrier among those threads before use.
template <int kThreads>
__device__ __forceinline__ void stage_plain_codebook(float* table, int bits) {
  for (int i = static_cast<int>(threadIdx.x); i < kCodebookEntries; i += kThreads) {
    table[i] = i < (1 << bits) ? tq_tables::codebook(bits)[i] : 0.0f;
  }
}

// Stages the `bits`-wide codebook kCopies times (LaneCodebook), by the block's first kThreads
// threads; entries past 2^bits read as 0. An entry holds the 32 bits `encode(value)` returns:
// the f32's own bits, or the value split into bf16 high and low parts for tensor-core V
// (values.cuh). A thread writes an entry's copies in an order rotated by its lane, so a warp's
// stores spread over the banks. Needs a barrier among those threads before use.
template <int kCopies, int kThreads, class Encode>
__device__ __forceinline__ void stage_lane_codebook(float* table, int bits, Encode encode) {
  auto* words = reinterpret_cast<unsigned*>(table);
  for (int entry = static_cast<int>(threadIdx.x); entry < kCodebookEntries; entry += kThreads) {
    const unsigned value = encode(entry < (1 << bits) ? tq_tables::codebook(bits)[entry] : 0.0f);
    const int lane = entry % kBanks;
#pragma unroll
    for (int j = 0; j < kCopies; ++j) words[entry * kCopies + (lane + j) % kCopies] = value;
  }
}

}  // namespace turbodecode::cuda::decode
