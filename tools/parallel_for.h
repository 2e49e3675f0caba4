// The CLI's own host parallelism (synthetic inputs, exact references), on as many threads as
// the CPU backend uses.
#pragma once

#include <cstdint>
#include <functional>

namespace turbodecode::cli {

// Runs body(begin, end) over [0, n) cut into contiguous chunks of at least `grain` items, one
// per thread, and returns when all are done; rethrows the first chunk's exception. The chunks
// never change what an item computes.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace turbodecode::cli
