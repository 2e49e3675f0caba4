// The work list of one CPU decode call (SPEC §2.5, §2.8): every query row resolved to the
// absolute positions it sees and its chunk size, and the batch cut into work items of
// (rows of one run that share a chunk size, KV head, chunk). What an item computes for a row
// depends only on that row (chunks.h), so the list's shape never changes a result.
#pragma once

#include <cstdint>
#include <vector>

#include "turbodecode/attention.h"

namespace turbodecode::attention {

// One query row: the absolute positions [lo, hi] it sees (never empty: a row sees at least its
// own token) and the positions per chunk of its length.
struct QueryRow {
  std::int32_t slot;
  std::int64_t lo, hi;
  std::int64_t chunk;

  std::int64_t first_chunk() const { return lo / chunk; }
  std::int64_t last_chunk() const { return hi / chunk; }
  int chunks() const { return static_cast<int>(last_chunk() - first_chunk() + 1); }
};

// Rows [first_row, first_row + rows) of one run, whose chunk sizes are equal, over chunk
// `chunk` (positions [chunk·C, (chunk + 1)·C)) of KV head `kv_head`.
struct WorkItem {
  std::int64_t first_row;
  int rows;
  int kv_head;
  std::int64_t chunk;
};

// The rows of a call, from host-readable slot ids and positions.
std::vector<QueryRow> resolve_rows(const DecodePlan& plan, const TensorView& slot_ids,
                                   const TensorView& seq_pos);

// The items of a call, run by run. Rows of a run have nondecreasing windows, so the rows that
// share a chunk size are consecutive, and the chunks any of them meets are consecutive too.
std::vector<WorkItem> work_items(const DecodePlan& plan, const std::vector<QueryRow>& rows);

}  // namespace turbodecode::attention
