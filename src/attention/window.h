// Which cache rows a decode query sees (SPEC §2.2), shared by both backends.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "turbodecode/mask_kind.h"

namespace turbodecode::attention {

// The visible positions of a query are logical indices [first, len); logical index i lives in
// cache row (ring_start + i) mod capacity (ring_start is 0 unless a ring has wrapped) and holds
// the token at position origin + i (of the cache's own positions: the absolute ones, or a
// shard's local ones). A query that sees none of the cache's positions has first = len = 0.
struct Window {
  std::int64_t first;
  std::int64_t len;
  std::int64_t ring_start;
  std::int64_t capacity;
  std::int64_t origin;  // seq_pos + 1 − len: the position of logical index 0

  TD_HOST_DEVICE std::int64_t visible() const { return len - first; }
  // Positions of the first and last visible token (last < first when none is visible).
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

// The share of every slot's positions one rank of a sharded decode holds (SPEC §2.10): the
// tokens at absolute positions [begin, end), stored where an unsharded cache stores positions
// [0, end − begin) (the rank appends position p as p − begin). {0, kWholeSequence} is no shard.
inline constexpr std::int64_t kWholeSequence = INT64_MAX;

struct ShardRange {
  std::int64_t begin = 0;
  std::int64_t end = kWholeSequence;
};

// The window of the query at absolute position seq_pos over a shard's local positions: the
// positions it sees unsharded, intersected with [begin, end).
TD_HOST_DEVICE Window query_window(MaskKind kind, std::int64_t seq_pos, std::int64_t capacity,
                                   std::int64_t sliding_window, ShardRange shard) {
  const std::int64_t last = seq_pos < shard.end - 1 ? seq_pos : shard.end - 1;
  const Window none{0, 0, 0, capacity, 0};
  if (last < shard.begin) return none;
  // The span of absolute positions the query sees ending at seq_pos (0: unbounded), cut to end
  // at `last`.
  std::int64_t span = kind == MaskKind::causal ? 0 : sliding_window;
  if (kind == MaskKind::sliding_ring && (span == 0 || span > capacity)) span = capacity;
  if (span > 0) {
    span -= seq_pos - last;
    if (span <= 0) return none;
  }
  return query_window(kind, last - shard.begin, capacity, span);
}

}  // namespace turbodecode::attention
