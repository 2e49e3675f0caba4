// Which cached positions a decode query sees. Its own header (only <cstdint>, constexpr
// functions) so the window arithmetic shared with CUDA kernels (src/attention/window.h) can use
// it directly.
#pragma once

#include <cstdint>

namespace turbodecode {

// causal:         a linear cache; query at seq_pos sp sees positions 0..sp.
// sliding_ring:   a ring cache; sees the last min(sp + 1, capacity) positions, and only the
//                 last `sliding_window` of them when window > 0.
// sliding_linear: a linear cache; like causal, limited to the last `sliding_window`.
enum class MaskKind : std::uint8_t { causal, sliding_ring, sliding_linear };

// The positions a decode query at seq_pos sees: first .. last (= seq_pos), inclusive. capacity
// is the cache's (it bounds a ring), sliding_window the layer's (0: none).
struct VisiblePositions {
  std::int64_t first = 0;
  std::int64_t last = 0;
  constexpr std::int64_t count() const { return last + 1 - first; }
};

constexpr VisiblePositions visible_positions(MaskKind mask, std::int64_t seq_pos,
                                             std::int64_t capacity, std::int64_t sliding_window) {
  std::int64_t count = seq_pos + 1;
  if (mask == MaskKind::sliding_ring && count > capacity) count = capacity;
  if (mask != MaskKind::causal && sliding_window > 0 && count > sliding_window) {
    count = sliding_window;
  }
  return {seq_pos + 1 - count, seq_pos};
}

}  // namespace turbodecode
