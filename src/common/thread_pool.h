// The CPU backend's worker threads: a fixed pool shared by every CPU operator.
#pragma once

#include <cstdint>
#include <functional>

namespace turbodecode {

// Number of worker threads (TURBODECODE_THREADS, else the hardware concurrency).
int cpu_threads();

// Runs body(begin, end) over [0, n) cut into contiguous chunks of at least `grain` items,
// spread over the pool; returns when all are done. Which thread runs a chunk never changes
// what it computes, so results do not depend on the thread count.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace turbodecode
