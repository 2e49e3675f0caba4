// TQ codebooks staged in shared memory for the split kernel, and how a thread turns a code
// into its codebook value. Two layouts:
//   PlainCodebook: entry c at word c. Lanes with random 8-bit codes hit random banks (entries
//     c and c + 32 share one), about 3-4-way conflicts per lookup; fine for the K side of the
//     all-quantized variant and for 4-bit codes (16 entries, one bank each: no conflicts).
//   LaneCodebook (V rows of one byte per code): one copy of the table per bank, entry c of
//     lane l at word c·32 + l, so every lane reads its own bank whatever its code: 256 × 32 ×
//     4 B = 32 KB. SplitShape (split_shape.cuh) sizes the tile so that the instances still
//     keep their target blocks per SM (git history has a mirrored 16 KB half, ~5 more
//     instructions per lookup, for when that stops being possible).
#pragma once

#include "attention/cuda/decode_params.cuh"
#include "tq/cuda/codec_tables.cuh"

namespace turbodecode::cuda::decode {

// Largest codebook (8-bit), and the banks a replicated table is spread over.
inline constexpr int kCodebookEntries = 256;
inline constexpr int kBanks = 32;

// How the split kernel looks V codes up.
enum class VLookup : int { none, plain, lane };

__host__ __device__ constexpr int codebook_bytes(VLookup lookup) {
  switch (lookup) {
    case VLookup::plain:
      return kCodebookEntries * 4;
    case VLookup::lane:
      return kCodebookEntries * kBanks * 4;
    default:
      return 0;
  }
}

struct PlainCodebook {
  const float* table;

  __device__ float operator()(unsigned code) const { return table[code]; }
};

struct LaneCodebook {
  unsigned lane_address;  // shared-memory address of this lane's bank in entry 0

  __device__ LaneCodebook(const float* table, int lane)
      : lane_address(static_cast<unsigned>(__cvta_generic_to_shared(table + lane))) {}

  // Codes arrive masked to 8 bits; entries past the codebook read as 0. From the lane's
  // 32-bit shared address a lookup is shift, mask and add (generic indexing took one more
  // instruction). Not volatile: the table is constant once staged, and the code comes from
  // a load issued after that barrier.
  __device__ float operator()(unsigned code) const {
    float value;
    asm("ld.shared.f32 %0, [%1];\n" : "=f"(value) : "r"(lane_address + code * (kBanks * 4)));
    return value;
  }

  // The entry's 32 bits as they are (a table staged as bf16 pairs: see stage_lane_codebook).
  __device__ unsigned word(unsigned code) const {
    unsigned value;
    asm("ld.shared.u32 %0, [%1];\n" : "=r"(value) : "r"(lane_address + code * (kBanks * 4)));
    return value;
  }
};

// Stages the `bits`-wide codebook in the plain layout; entries past 2^bits read as 0, so a
// stray high bit cannot reach uninitialised memory. Needs a block barrier before use.
__device__ __forceinline__ void stage_plain_codebook(float* table, int bits) {
  for (int i = static_cast<int>(threadIdx.x); i < kCodebookEntries;
       i += static_cast<int>(blockDim.x)) {
    table[i] = i < (1 << bits) ? tq_tables::codebook(bits)[i] : 0.0f;
  }
}

// Stages the `bits`-wide codebook once per bank (LaneCodebook); entries past 2^bits read as 0.
// An entry holds the 32 bits `encode(value)` returns: the f32's own bits, or the value split
// into bf16 high and low parts for tensor-core V (values.cuh). A thread writes an entry to the
// banks in an order rotated by its lane, so a warp's 32 stores hit 32 banks. Needs a block
// barrier before use.
template <class Encode>
__device__ __forceinline__ void stage_lane_codebook(float* table, int bits, Encode encode) {
  auto* words = reinterpret_cast<unsigned*>(table);
  for (int entry = static_cast<int>(threadIdx.x); entry < kCodebookEntries;
       entry += static_cast<int>(blockDim.x)) {
    const unsigned value = encode(entry < (1 << bits) ? tq_tables::codebook(bits)[entry] : 0.0f);
    const int lane = entry % kBanks;
#pragma unroll
    for (int j = 0; j < kBanks; ++j) words[entry * kBanks + (lane + j) % kBanks] = value;
  }
}

}  // namespace turbodecode::cuda::decode
