// Sizes of the TQ codebooks the split kernel stages in shared memory, and how its V pass looks
// codes up. Host-safe, like split_shape.h, which lays the tables out.
#pragma once

#include "common/host_device.h"

namespace turbodecode::cuda::decode {

// Largest codebook (8-bit), and the banks of shared memory.
inline constexpr int kCodebookEntries = 256;
inline constexpr int kBanks = 32;

// How the split kernel looks V codes up.
enum class VLookup : int { none, plain, lane };

// Bytes of a staged table; `copies` counts the replicas of a lane table.
TD_HOST_DEVICE_CONSTEXPR int codebook_bytes(VLookup lookup, int copies) {
  switch (lookup) {
    case VLookup::plain:
      return kCodebookEntries * 4;
    case VLookup::lane:
      return kCodebookEntries * copies * 4;
    default:
      return 0;
  }
}

}  // namespace turbodecode::cuda::decode
