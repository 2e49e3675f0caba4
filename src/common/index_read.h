// Host copies of small i32 index arrays (slot ids, positions, block table entries), for the
// checks that validate their values before a kernel uses them.
#pragma once

#include <cstdint>
#include <vector>

#include "turbodecode/tensor.h"

namespace turbodecode {

// The values of an i32 [n] view (any stride) on the host. A CUDA view is copied once the work
// queued on `stream`, which may still be writing it, has finished; the caller makes sure the
// stream is not being captured.
std::vector<std::int32_t> read_indices_to_host(const TensorView& indices, Stream stream);

// The i32 elements of `view` at `offsets` (in elements from its data pointer, each within the
// view's span) on the host. A CUDA view's span between the least and the greatest offset is
// copied once, after the work queued on `stream`, as above.
std::vector<std::int32_t> read_elements_to_host(const TensorView& view,
                                                const std::vector<std::int64_t>& offsets,
                                                Stream stream);

}  // namespace turbodecode
