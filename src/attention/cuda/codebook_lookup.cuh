// TQ codebooks staged in shared memory for the split kernel, and how a thread turns a code
// into its codebook value. Three layouts:
//   PlainCodebook: entry c at word c. Lanes with random 8-bit codes hit random banks (entries
//     c and c + 32 share one), about 3-4-way conflicts per lookup; fine for the K side of the
//     all-quantized variant and for 4-bit codes (16 entries, one bank each: no conflicts).
//   LaneCodebook (V rows of one byte per code): one copy of the table per bank, entry c of
//     lane l at word c·32 + l, so every lane reads its own bank whatever its code: 256 × 32 ×
//     4 B = 32 KB.
//   LaneMirroredCodebook: the same for the lower half only (16 KB), for instances where 32 KB
//     would cost a block per SM. The codebooks are symmetric (c[N−1−i] = −c[i], exactly:
//     checked below), so an upper code reads entry N−1−c and flips the sign bit: exact, at
//     about four more integer instructions per lookup.
// SplitShape (split_shape.cuh) picks between the two replicated layouts per instance.
#pragma once

#include <cstddef>

#include "attention/cuda/decode_params.cuh"
#include "tq/cuda/codec_tables.cuh"
#include "tq/tables.h"

namespace turbodecode::cuda::decode {

// Largest codebook (8-bit), and the banks a replicated table is spread over.
inline constexpr int kCodebookEntries = 256;
inline constexpr int kBanks = 32;
// Entries of the lower half of the largest one-byte codebook.
inline constexpr int kMirroredEntries = kCodebookEntries / 2;

template <class Table>
constexpr bool mirror_symmetric(const Table& table) {
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i] != -table[table.size() - 1 - i]) return false;
  }
  return true;
}
static_assert(mirror_symmetric(tq::kCodebook5bit) && mirror_symmetric(tq::kCodebook6bit) &&
                  mirror_symmetric(tq::kCodebook8bit),
              "LaneMirroredCodebook needs codebooks with c[N-1-i] == -c[i]");

// How the split kernel looks V codes up.
enum class VLookup : int { none, plain, lane, lane_mirrored };

__host__ __device__ constexpr int codebook_bytes(VLookup lookup) {
  switch (lookup) {
    case VLookup::plain:
      return kCodebookEntries * 4;
    case VLookup::lane:
      return kCodebookEntries * kBanks * 4;
    case VLookup::lane_mirrored:
      return kMirroredEntries * kBanks * 4;
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

  __device__ LaneCodebook(const float* table, int /*bits*/, int lane)
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
};

struct LaneMirroredCodebook {
  const float* lane_table;  // the table plus this lane's bank
  unsigned index_mask;      // entries of the half table, minus one
  int sign_shift;           // moves a code's top bit to bit 31

  __device__ LaneMirroredCodebook(const float* table, int bits, int lane)
      : lane_table(table + lane), index_mask((1u << (bits - 1)) - 1u), sign_shift(32 - bits) {}

  __device__ float operator()(unsigned code) const {
    // All ones for the upper half of the codebook (top code bit set), else zero.
    const int upper = static_cast<int>(code << sign_shift) >> 31;
    // Upper codes read entry N−1−c = ~c within the half; the mask also keeps stray high bits
    // inside the table.
    const unsigned index = (code ^ static_cast<unsigned>(upper)) & index_mask;
    const float lower_value = lane_table[index * kBanks];
    return __int_as_float(__float_as_int(lower_value) ^ (upper & static_cast<int>(0x80000000u)));
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

// Stages the first `entries` entries of the `bits`-wide codebook once per bank (LaneCodebook:
// all 256, LaneMirroredCodebook: the lower 128); entries past the codebook's half or whole
// (`mirrored`) read as 0. A thread writes an entry to the banks in an order rotated by its
// lane, so a warp's 32 stores hit 32 banks. Needs a block barrier before use.
__device__ __forceinline__ void stage_lane_codebook(float* table, int bits, bool mirrored) {
  const int entries = mirrored ? kMirroredEntries : kCodebookEntries;
  const int valid = mirrored ? 1 << (bits - 1) : 1 << bits;
  for (int entry = static_cast<int>(threadIdx.x); entry < entries;
       entry += static_cast<int>(blockDim.x)) {
    const float value = entry < valid ? tq_tables::codebook(bits)[entry] : 0.0f;
    const int lane = entry % kBanks;
#pragma unroll
    for (int j = 0; j < kBanks; ++j) table[entry * kBanks + (lane + j) % kBanks] = value;
  }
}

}  // namespace turbodecode::cuda::decode
