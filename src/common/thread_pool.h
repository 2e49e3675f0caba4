// The CPU backend's worker threads: a fixed pool shared by every CPU operator.
#pragma once

#include <cstdint>
#include <functional>

#include "turbodecode/tensor.h"  // cpu_threads()

namespace turbodecode {

// Runs body(begin, end) over [0, n) cut into contiguous chunks of at least `grain` items,
// spread over the pool; returns when all are done. Which thread runs a chunk never changes
// what it computes, so results do not depend on the thread count.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace turbodecode
