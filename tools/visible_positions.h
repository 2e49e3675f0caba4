// Which positions a decode query sees (SPEC §2.2), for building exact references on the host.
#pragma once

#include <cstdint>

#include "turbodecode/attention.h"

namespace turbodecode::cli {

// The query at `position` sees the contiguous positions [first, position]; returns first.
std::int64_t first_visible_position(MaskKind mask, std::int64_t position, std::int64_t capacity,
                                    std::int64_t sliding_window);

}  // namespace turbodecode::cli
