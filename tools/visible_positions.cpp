#include "visible_positions.h"

#include "attention/window.h"

namespace turbodecode::cli {
namespace {

attention::WindowKind window_kind(MaskKind mask) {
  switch (mask) {
    case MaskKind::sliding_ring:
      return attention::WindowKind::sliding_ring;
    case MaskKind::sliding_linear:
      return attention::WindowKind::sliding_linear;
    case MaskKind::causal:
      break;
  }
  return attention::WindowKind::causal;
}

}  // namespace

std::int64_t first_visible_position(MaskKind mask, std::int64_t position, std::int64_t capacity,
                                    std::int64_t sliding_window) {
  const attention::Window window =
      attention::query_window(window_kind(mask), position, capacity, sliding_window);
  // The window's logical index i is position (position + 1 - len + i).
  return position + 1 - window.len + window.first;
}

}  // namespace turbodecode::cli
