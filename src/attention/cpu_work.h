// The work list of one CPU decode call (SPEC §2.5, §2.8): every query row resolved to the
// absolute positions it sees and its chunk size, and the batch cut into work items of
// (rows of one run that share a chunk size, KV head, chunk). What an item computes for a row
// depends only on that row (chunks.h), so the list's shape never changes a result.
#pragma once

#include <cstdint>
#include <vector>

#include "turbodecode/attention.h"

namespace turbodecode::attention {

// One query row: the positions [lo, hi] of the cache it sees (absolute, or local to a shard;
// hi < lo when it sees none of a shard's) and the positions per chunk of its length.
struct QueryRow {
  std::int32_t slot;
  std::int64_t lo, hi;
  std::int64_t chunk;

  bool sees_nothing() const { return hi < lo; }
  std::int64_t first_chunk() const { return lo / chunk; }
  std::int64_t last_chunk() const { return hi / chunk; }
  int chunks() const {
    return sees_nothing() ? 0 : static_cast<int>(last_chunk() - first_chunk() + 1);
  }
};

// Rows [first_row, first_row + rows) of one run, whose chunk sizes are equal, over chunk
// `chunk` (positions [chunk·C, (chunk + 1)·C)) of KV head `kv_head`.
struct WorkItem {
  std::int64_t first_row;
  int rows;
  int kv_head;
  std::int64_t chunk;
};

// The rows of a run_decode, from host-readable slot ids, positions and shard ranges.
std::vector<QueryRow> resolve_rows(const DecodePlan& plan, const TensorView& slot_ids,
                                   const TensorView& seq_pos, const DecodeShard& shard);

// The items of a run_decode, run by run: per stretch of a run's rows that share a chunk size,
// the chunks any of them meets (consecutive: the rows' windows overlap or touch).
std::vector<WorkItem> work_items(const DecodePlan& plan, const std::vector<QueryRow>& rows);

}  // namespace turbodecode::attention
