// visible_positions (the public statement of which positions a query sees) against the window
// the decode backends compute (src/attention/window.h), over every mask, ring wrap-around and
// window size around the edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "attention/window.h"
#include "turbodecode/mask_kind.h"

namespace turbodecode {
namespace {

TEST(VisiblePositions, AreTheDecodeWindowsPositions) {
  for (MaskKind mask : {MaskKind::causal, MaskKind::sliding_ring, MaskKind::sliding_linear}) {
    for (std::int64_t capacity : {1, 7, 64}) {
      for (std::int64_t window : {0, 1, 5, 64, 100}) {
        for (std::int64_t position = 0; position < 3 * capacity + 70; ++position) {
          // A linear cache holds every position up to its capacity.
          const std::int64_t cap =
              mask == MaskKind::sliding_ring ? capacity : std::max(capacity, position + 1);
          const attention::Window w = attention::query_window(mask, position, cap, window);
          const VisiblePositions v = visible_positions(mask, position, cap, window);
          SCOPED_TRACE(::testing::Message()
                       << "mask " << static_cast<int>(mask) << ", capacity " << cap << ", window "
                       << window << ", position " << position);
          EXPECT_EQ(v.last, position);
          EXPECT_EQ(v.count(), w.visible());
          EXPECT_EQ(v.first, position + 1 - w.len + w.first);
        }
      }
    }
  }
}

TEST(VisiblePositions, FollowTheMask) {
  static_assert(visible_positions(MaskKind::causal, 9, 4, 3).first == 0);
  static_assert(visible_positions(MaskKind::sliding_linear, 9, 100, 3).first == 7);
  static_assert(visible_positions(MaskKind::sliding_ring, 9, 4, 0).first == 6);
  static_assert(visible_positions(MaskKind::sliding_ring, 9, 4, 2).count() == 2);
  EXPECT_EQ(visible_positions(MaskKind::sliding_ring, 2, 4, 0).count(), 3);
}

}  // namespace
}  // namespace turbodecode
