// TQ codebooks staged in shared memory for the split kernel, and how a thread turns a code
// into its codebook value. Two layouts:
//   PlainCodebook: entry c at word c. Lanes with random 8-bit codes hit random banks (entries
//     c and c + 32 share one), about 3-4-way conflicts per lookup; fine for the K side of the
//     all-quantized variant and for 4-bit codes (16 entries, one bank each: no conflicts).
//   LaneMirroredCodebook (V rows of one byte per code): one copy of the table per bank, entry j
//     of lane l at word j·32 + l, so every lane reads its own bank whatever its code. The
//     codebooks are symmetric (c[N−1−i] = −c[i], exactly: checked below), so only the lower
//     half is kept: 128 entries × 32 banks × 4 B = 16 KB instead of 32 KB, which keeps the
//     F16-K instances at their blocks per SM. A code of the upper half reads the mirrored
//     entry N−1−c and flips the sign bit: exact, no rounding.
#pragma once

#include <cstddef>

#include "attention/cuda/decode_params.cuh"
#include "tq/cuda/codec_tables.cuh"
#include "tq/tables.h"

namespace turbodecode::cuda::decode {

// Largest codebook (8-bit) in the plain layout.
inline constexpr int kCodebookEntries = 256;
// Entries of the lower half of the largest one-byte codebook, and the lanes (banks) it is
// replicated over.
inline constexpr int kMirroredEntries = kCodebookEntries / 2;
inline constexpr int kBanks = 32;

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

// Shared-memory bytes of the staged codebook a V codec decodes with (0: none).
__host__ __device__ constexpr int v_codebook_bytes(RowCodec codec) {
  switch (codec) {
    case RowCodec::tq_byte:
      return kMirroredEntries * kBanks * 4;
    case RowCodec::tq_nibble:
      return kCodebookEntries * 4;
    default:
      return 0;
  }
}

struct PlainCodebook {
  const float* table;

  __device__ float operator()(unsigned code) const { return table[code]; }
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

// Stages the lower half of the `bits`-wide codebook once per bank (LaneMirroredCodebook); needs
// one thread per half-table entry and a block barrier before use. Each thread writes its entry
// to the banks in an order rotated by its lane, so a warp's 32 stores hit 32 banks.
__device__ __forceinline__ void stage_lane_mirrored_codebook(float* table, int bits) {
  const int entry = static_cast<int>(threadIdx.x);
  if (entry >= kMirroredEntries) return;
  const float value = entry < (1 << (bits - 1)) ? tq_tables::codebook(bits)[entry] : 0.0f;
  const int lane = entry % kBanks;
#pragma unroll
  for (int j = 0; j < kBanks; ++j) table[entry * kBanks + (lane + j) % kBanks] = value;
}

}  // namespace turbodecode::cuda::decode
