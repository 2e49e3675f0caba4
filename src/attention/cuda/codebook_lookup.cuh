// TQ codebooks staged in shared memory for the decode kernel, as bf16 high/low pairs (the
// operands of its tensor-core tiles), and how a lane looks a code up.
//
// LaneCodebook<kCopies>: the table replicated over the banks, entry c of copy r at word
// c·kCopies + r, lane l reading copy l mod kCopies. With 32 copies every lane reads its own
// bank whatever its code: one wavefront per lookup. With 16 copies (the 8-bit table, where the
// smaller table keeps a block on the SM) lanes l and l + 16 share a copy: about two.
#pragma once

#include <cuda_bf16.h>

#include "common/cuda/shared_address.cuh"
#include "tq/cuda/codec_tables.cuh"

namespace turbodecode::cuda::decode {

// A value split into bf16 high and low parts, high in bits 0-15 and low in bits 16-31: the
// staged table entries and the stored softmax weights.
__device__ __forceinline__ unsigned bf16_pair(float value) {
  const __nv_bfloat16 high = __float2bfloat16_rn(value);
  const __nv_bfloat16 low = __float2bfloat16_rn(value - __bfloat162float(high));
  return static_cast<unsigned>(__bfloat16_as_ushort(high)) |
         (static_cast<unsigned>(__bfloat16_as_ushort(low)) << 16);
}

template <int kCopies>
struct LaneCodebook {
  static_assert(kCopies == 32 || kCopies == 16, "one copy per bank, or per two");
  unsigned lane_address;  // shared-memory address of this lane's copy of entry 0

  __device__ LaneCodebook(const unsigned* table, int lane)
      : lane_address(shared_address(table + lane % kCopies)) {}

  // The entry of a code (< the table's entries): one shift-and-add from the lane's address.
  // Not volatile: the table is constant once staged, and codes come from loads issued after
  // that barrier.
  __device__ unsigned word(unsigned code) const {
    unsigned value;
    asm("ld.shared.u32 %0, [%1];\n" : "=r"(value) : "r"(lane_address + code * (kCopies * 4)));
    return value;
  }
};

// Stages the `bits`-wide codebook kCopies times as bf16 pairs, by the block's first kThreads
// threads. A thread writes an entry's copies in an order rotated by its lane, so a warp's
// stores spread over the banks. Needs a barrier among those threads before use.
template <int kCopies, int kThreads>
__device__ __forceinline__ void stage_lane_codebook(unsigned* table, int bits) {
  const int entries = 1 << bits;
  for (int entry = static_cast<int>(threadIdx.x); entry < entries; entry += kThreads) {
    const unsigned value = bf16_pair(tq_tables::codebook(bits)[entry]);
    const int lane = entry % 32;
#pragma unroll
    for (int j = 0; j < kCopies; ++j) table[entry * kCopies + (lane + j) % kCopies] = value;
  }
}

}  // namespace turbodecode::cuda::decode
