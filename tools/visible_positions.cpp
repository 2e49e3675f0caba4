#include "visible_positions.h"

#include "attention/window.h"

namespace turbodecode::cli {

std::int64_t first_visible_position(MaskKind mask, std::int64_t position, std::int64_t capacity,
                                    std::int64_t sliding_window) {
  const attention::Window window =
      attention::query_window(mask, position, capacity, sliding_window);
  // The window's logical index i is position (position + 1 - len + i).
  return position + 1 - window.len + window.first;
}

}  // namespace turbodecode::cli
