// How a query row's visible positions are cut into chunks, the units of decode work that each
// keep a softmax state of their own (SPEC §2.5, §2.6, §2.8). Shared by the planner and both
// backends.
//
// Chunk j of a row holds its visible positions in [j·C, (j + 1)·C): chunks are aligned on
// absolute positions, not on the row's first visible one, so the rows of a draft (consecutive
// positions of one slot) cut their common positions identically, and a row is cut the same
// way in a run of its own and in any batch. C = min_positions · 2^k: doubled while the row
// would have more than kSpreadChunks chunks and C is below spread_positions (a row of a few
// thousand positions keeps short chunks, to spread over many workers, while a longer one gets
// fewer, longer chunks, whose states and merges cost less), then while it would have more
// than max_chunks (the bound the workspace is sized for).
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace turbodecode::attention {

// Every chunk size is a multiple of this many positions (the tiles of both backends divide it).
inline constexpr std::int64_t kChunkAlign = 32;

// Chunks a row is cut into at most while its chunks stay below spread_positions.
inline constexpr std::int64_t kSpreadChunks = 32;

// A backend's automatic policy: chunks of at least min_positions, growing up to
// spread_positions to keep a row within kSpreadChunks chunks, and at most max_chunks of them.
struct ChunkLimits {
  std::int64_t min_positions;
  int max_chunks;
  std::int64_t spread_positions;
};

struct ChunkPolicy {
  std::int64_t min_positions = 32;     // a multiple of 32 (the tile alignment of both backends)
  int max_chunks = 1;                  // no row has more
  std::int64_t spread_positions = 32;  // a power-of-two multiple of min_positions
  std::int64_t fixed_positions = 0;    // > 0: every row uses exactly this C (tests, benchmarks)
};

// C for a row that sees `visible` positions. Its positions [lo, lo + visible) meet at most
// ceil(visible / C) + 1 chunks (one more when lo is not a multiple of C), so C is the first
// size with ceil(visible / C) + 1 <= max_chunks, that is visible <= C · (max_chunks − 1), at
// least the spread size: multiplications, where a division would be a long subroutine on the
// GPU (every block of the decode kernel evaluates this for its rows before any data moves).
TD_HOST_DEVICE std::int64_t chunk_positions(const ChunkPolicy& policy, std::int64_t visible) {
  if (policy.fixed_positions > 0) return policy.fixed_positions;
  std::int64_t c = policy.min_positions;
  while (c < policy.spread_positions && visible > c * kSpreadChunks) c *= 2;
  while (visible > c * (policy.max_chunks - 1)) c *= 2;
  return c;
}

// The chunks [first, last] that hold a row's visible positions [lo, hi] (hi >= lo).
struct ChunkSpan {
  std::int64_t first;
  std::int64_t last;
};

TD_HOST_DEVICE ChunkSpan chunk_span(std::int64_t lo, std::int64_t hi, std::int64_t c) {
  return {lo / c, hi / c};
}

}  // namespace turbodecode::attention
