// Which cache rows a decode query sees (SPEC §2.2), shared by both backends.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "turbodecode/mask_kind.h"

namespace turbodecode::attention {

// The visible positions of a query are logical indices [first, len); logical index i lives in
// cache row (ring_start + i) mod capacity (ring_start is 0 unless a ring has wrapped) and holds
// the token at absolute position origin + i.
struct Window {
  std::int64_t first;
  std::int64_t len;
  std::int64_t ring_start;
  std::int64_t capacity;
  std::int64_t origin;  // seq_pos + 1 − len: the position of logical index 0

  TD_HOST_DEVICE std::int64_t visible() const { return len - first; }
  // Absolute positions of the first and last visible token (len > first).
  TD_HOST_DEVICE std::int64_t first_position() const { return origin + first; }
  TD_HOST_DEVICE std::int64_t last_position() const { return origin + len - 1; }
  TD_HOST_DEVICE std::int64_t row(std::int64_t logical) const {
    std::int64_t r = ring_start + logical;
    return r >= capacity ? r - capacity : r;
  }
};

TD_HOST_DEVICE Window query_window(MaskKind kind, std::int64_t seq_pos, std::int64_t capacity,
                                   std::int64_t sliding_window) {
  Window w{0, seq_pos + 1, 0, capacity, 0};
  if (kind == MaskKind::sliding_ring) {
    if (w.len >= capacity) {
      w.len = capacity;
      w.ring_start = (seq_pos + 1) % capacity;
      w.origin = seq_pos + 1 - capacity;
    }
  }
  if (kind != MaskKind::causal && sliding_window > 0 && w.len > sliding_window) {
    w.first = w.len - sliding_window;
  }
  return w;
}

}  // namespace turbodecode::attention
