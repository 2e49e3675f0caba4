// Which cached positions a decode query sees. Its own header (only <cstdint>) so the window
// arithmetic shared with CUDA kernels (src/attention/window.h) can use it directly.
#pragma once

#include <cstdint>

namespace turbodecode {

// causal:         a linear cache; query at seq_pos sp sees positions 0..sp.
// sliding_ring:   a ring cache; sees the last min(sp + 1, capacity) positions, and only the
//                 last `sliding_window` of them when window > 0.
// sliding_linear: a linear cache; like causal, limited to the last `sliding_window`.
enum class MaskKind : std::uint8_t { causal, sliding_ring, sliding_linear };

}  // namespace turbodecode
