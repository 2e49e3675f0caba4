// The work list of the persistent decode kernel, derived on the device from the index arrays
// (so a captured graph replays as lengths and tables change). Every block computes the same
// list and takes an equal share of it.
//
// A run is the query_tokens rows of one slot (a draft); its rows are served together where
// their chunk sizes agree: part 0 holds the rows with the run's first chunk size, part 1 the
// later rows whose longer length doubled it (at most one doubling within a run). A task is
// (run, part, KV head, block of `columns` query columns); an item is one chunk of a task
// (chunks.h), the unit a block streams and keeps one softmax state for. Items are ordered by
// run, part, KV head, column block, chunk, so the items a block takes are mostly consecutive
// chunks of one task, which its copy warp streams as one range.
#pragma once

#include <cstdint>

#include "attention/chunks.h"
#include "attention/cuda/decode_params.cuh"
#include "attention/window.h"

namespace turbodecode::cuda::decode {

// A query row's slot and window (over its slot's shard when sharded); !valid when it names
// an index the cache cannot hold (only possible while a graph replays: the host checks).
struct QueryRow {
  bool valid;
  std::int64_t slot;
  attention::Window window;
};

__device__ __forceinline__ QueryRow query_row(const DecodeParams& p, int row) {
  const std::int64_t slot = p.slot_ids[row * p.slot_stride];
  const std::int64_t position = p.seq_pos[row * p.pos_stride];
  bool valid = slot >= 0 && slot < p.slots && position >= 0;
  attention::ShardRange shard;
  if (valid && p.shard_begin != nullptr) {
    shard = {p.shard_begin[slot * p.shard_begin_stride], p.shard_end[slot * p.shard_end_stride]};
    valid = shard.begin >= 0 && shard.begin <= shard.end;
  }
  const attention::Window window =
      attention::query_window(p.mask, position, p.capacity, p.sliding_window, shard);
  valid = valid && (p.ring || window.visible() == 0 || window.last_position() < p.capacity);
  return {valid, slot, window};
}

__device__ __forceinline__ std::int64_t row_chunk(const DecodeParams& p,
                                                  const attention::Window& window) {
  return attention::chunk_positions(p.chunk_policy, window.visible());
}

struct RunPart {
  int items;   // work items of the part (0: the part is empty)
  bool valid;  // false: one item that writes the run's rows as NaN
  int run, part;
  int first_token, tokens;  // the part's rows: run · query_tokens + first_token + i
  std::int64_t slot;
  std::int64_t chunk;        // positions per chunk
  std::int64_t lo, hi;       // the union of its rows' visible positions
  std::int64_t first_chunk;  // lo / chunk
  int chunks;                // items of one task
  int task_tiles;            // tiles of the copy warp's stream one task covers
  int column_chunks;         // blocks of columns per KV head

  __device__ int columns_here(const DecodeParams& p, int column_chunk) const {
    const int left = tokens * p.group - column_chunk * p.columns;
    return left < p.columns ? left : p.columns;
  }
};

// One pass over a run's rows (one copy of query_row's code, which runs cold at the launch's
// start): their validity, their chunk sizes and each part's union of visible positions. The
// rows' visible counts move one way along the run (with the position, or against it on a shard
// whose end the run lies beyond), so the rows with the first chunk size are a prefix. A third
// size cannot occur (the plan's thresholds lie further apart than a run is long); the run is
// then invalid, as is one whose rows disagree on the slot or name an index the cache cannot
// hold (its rows become NaN: only possible while a graph replays, since the host checks indices
// otherwise). Not inlined: called once per run by the search, it would otherwise lend its
// registers' pressure to the loops that call it.
struct RunRows {
  bool valid;
  int split;  // rows [0, split) form part 0, the rest part 1
  std::int64_t slot;
  std::int64_t chunk[2];       // each part's positions per chunk
  std::int64_t lo[2], hi[2];   // each part's union of visible positions (hi < lo: none)
};

static __device__ __noinline__ RunRows scan_run(const DecodeParams& p, int run) {
  const int first_row = run * p.query_tokens;
  RunRows s{true, p.query_tokens, 0, {0, 0}, {INT64_MAX, INT64_MAX}, {-1, -1}};
  for (int t = 0; t < p.query_tokens; ++t) {
    const QueryRow row = query_row(p, first_row + t);
    if (t == 0) s.slot = row.slot;
    s.valid = s.valid && row.valid && row.slot == s.slot;
    const std::int64_t c = row_chunk(p, row.window);
    if (t == 0) {
      s.chunk[0] = c;
    } else if (c != s.chunk[0]) {
      if (s.split == p.query_tokens) {
        s.split = t;
        s.chunk[1] = c;
      } else {
        s.valid = s.valid && c == s.chunk[1];
      }
    }
    if (row.window.visible() == 0) continue;
    const int part = t < s.split ? 0 : 1;
    const std::int64_t first = row.window.first_position(), last = row.window.last_position();
    s.lo[part] = first < s.lo[part] ? first : s.lo[part];
    s.hi[part] = last > s.hi[part] ? last : s.hi[part];
  }
  return s;
}

// Part `part` of run `run` from its rows' pass. Not inlined, like scan_run.
static __device__ __noinline__ RunPart part_of(const DecodeParams& p, const RunRows& rows, int run,
                                               int part) {
  RunPart r{};
  r.run = run;
  r.part = part;
  r.slot = rows.slot;
  if (!rows.valid) {
    r.valid = false;
    r.items = part == 0 ? 1 : 0;
    return r;
  }
  r.valid = true;
  r.first_token = part == 0 ? 0 : rows.split;
  r.tokens = part == 0 ? rows.split : p.query_tokens - rows.split;
  if (r.tokens == 0) {
    r.items = 0;
    return r;
  }
  r.chunk = rows.chunk[part];
  r.lo = rows.lo[part];
  r.hi = rows.hi[part];
  r.column_chunks = (r.tokens * p.group + p.columns - 1) / p.columns;
  if (r.hi < r.lo) {  // no row sees any of the shard's positions: one empty chunk, a nominal tile
    r.lo = 0;
    r.hi = -1;
    r.first_chunk = 0;
    r.chunks = 1;
    r.task_tiles = 1;
  } else {
    r.first_chunk = r.lo / r.chunk;
    r.chunks = static_cast<int>(r.hi / r.chunk - r.first_chunk + 1);
    if (r.chunks > p.task_chunks) {  // beyond the workspace: cannot happen for a valid plan
      r.valid = false;
      r.items = part == 0 ? 1 : 0;
      return r;
    }
    r.task_tiles = static_cast<int>(r.hi / p.tile - r.lo / p.tile + 1);
  }
  r.items = p.n_kv_heads * r.column_chunks * r.chunks;
  return r;
}

// Describes part `part` of run `run`.
__device__ __forceinline__ RunPart describe_part(const DecodeParams& p, int run, int part) {
  return part_of(p, scan_run(p, run), run, part);
}

// The same pass as held by lane `source` of the warp (every lane takes part, each naming its
// own source).
__device__ __forceinline__ RunRows shuffle_rows(const RunRows& s, int source) {
  RunRows r;
  r.valid = __shfl_sync(0xffffffffu, static_cast<int>(s.valid), source) != 0;
  r.split = __shfl_sync(0xffffffffu, s.split, source);
  r.slot = __shfl_sync(0xffffffffu, s.slot, source);
#pragma unroll
  for (int part = 0; part < 2; ++part) {
    r.chunk[part] = __shfl_sync(0xffffffffu, s.chunk[part], source);
    r.lo[part] = __shfl_sync(0xffffffffu, s.lo[part], source);
    r.hi[part] = __shfl_sync(0xffffffffu, s.hi[part], source);
  }
  return r;
}

// One item: a chunk of a task.
struct WorkItem {
  int kv_head;
  int column_chunk;
  int chunk_index;  // 0 … part.chunks − 1 (absolute chunk: part.first_chunk + chunk_index)
};

__device__ __forceinline__ WorkItem item_of(const RunPart& part, int item) {
  const int per_head = part.column_chunks * part.chunks;
  const int rest = item % per_head;
  return {item / per_head, rest / part.chunks, rest % part.chunks};
}

// Index of a task among the workspace's task slots.
__device__ __forceinline__ std::int64_t task_index(const DecodeParams& p, const RunPart& part,
                                                   const WorkItem& item) {
  return ((static_cast<std::int64_t>(part.run) * p.parts_per_run + part.part) * p.n_kv_heads +
          item.kv_head) *
             p.column_chunks +
         item.column_chunk;
}

// The positions an item covers: its chunk intersected with the part's visible union.
struct ItemRange {
  std::int64_t from, to;  // inclusive
};

__device__ __forceinline__ ItemRange item_range(const RunPart& part, const WorkItem& item) {
  const std::int64_t begin = (part.first_chunk + item.chunk_index) * part.chunk;
  const std::int64_t end = begin + part.chunk - 1;
  return {begin > part.lo ? begin : part.lo, end < part.hi ? end : part.hi};
}

// Walks a block's items in order: part by part, item by item.
struct WorkCursor {
  RunPart part;
  int item;

  // Moves to the next item; past the end of a part, to the next non-empty part.
  __device__ void advance(const DecodeParams& p) {
    ++item;
    while (item >= part.items && (part.run + 1 < p.n_runs || part.part + 1 < p.parts_per_run)) {
      part = part.part + 1 < p.parts_per_run ? describe_part(p, part.run, part.part + 1)
                                             : describe_part(p, part.run + 1, 0);
      item = 0;
    }
  }
};

// What a run part costs, in tiles of the copy warp's stream (the unit the blocks share out):
// every task of a part covers the same positions, task_tiles tiles; an invalid run costs one.
__device__ __forceinline__ std::int64_t part_tiles(const RunPart& r) {
  if (!r.valid || r.items == 0) return r.items;
  return static_cast<std::int64_t>(r.items / r.chunks) * r.task_tiles;
}

// The first item of a part that starts at or after tile `offset` of the part's stream (the
// part's item count when none does).
__device__ __forceinline__ int first_item_from(const DecodeParams& p, const RunPart& r,
                                               std::int64_t offset) {
  if (!r.valid) return offset > 0 ? r.items : 0;
  const std::int64_t task = offset / r.task_tiles;
  const std::int64_t within = offset % r.task_tiles;
  if (within == 0) return static_cast<int>(task * r.chunks);
  // Chunk k > 0 of a task starts at absolute tile (first_chunk + k) · C / T.
  const std::int64_t per_chunk = r.chunk / p.tile;
  const std::int64_t target = r.lo / p.tile + within;
  const std::int64_t k = (target + per_chunk - 1) / per_chunk - r.first_chunk;
  return static_cast<int>(task * r.chunks + k);
}

// Where an item lies: run, part, item in the part, and its index in the whole list.
struct WorkStart {
  int run, part, item;
  std::int64_t index;
};

// The tiles and items of a whole run (both parts).
struct RunCost {
  std::int64_t tiles, items;
};

__device__ __forceinline__ RunCost run_cost(const DecodeParams& p, int run, const RunRows& rows) {
  RunCost cost{0, 0};
  for (int part = 0; part < p.parts_per_run; ++part) {
    const RunPart r = part_of(p, rows, run, part);
    cost.tiles += part_tiles(r);
    cost.items += r.items;
  }
  return cost;
}

// Run `first + lane`'s cost by each lane of a warp (zero past the last run). The costs of the
// first 32 runs, taken once, are `held`: a batch of up to 32 runs costs one pass.
__device__ __forceinline__ RunCost lane_run_cost(const DecodeParams& p, int first, int lane,
                                                 const RunCost& held) {
  if (first == 0) return held;
  const int run = first + lane;
  return run < p.n_runs ? run_cost(p, run, scan_run(p, run)) : RunCost{0, 0};
}

// Where a target tile lies, once the runs before it are counted: its run, the tile offset
// inside that run, and the items of the runs before (run = n_runs past the end).
struct TargetRun {
  int run;
  std::int64_t offset, items_before;
};

// The first item of run `target.run` (whose rows' pass is `rows`) that starts at or after tile
// `target.offset` of the run, and the part it lies in.
__device__ __forceinline__ WorkStart locate_in_run(const DecodeParams& p, const TargetRun& target,
                                                   const RunRows& rows, RunPart& found) {
  found = part_of(p, rows, target.run, 0);
  const std::int64_t tiles0 = part_tiles(found);
  if (target.offset < tiles0 || p.parts_per_run == 1) {
    const int item = first_item_from(p, found, target.offset);
    return {target.run, 0, item, target.items_before + item};
  }
  const int items0 = found.items;
  found = part_of(p, rows, target.run, 1);
  const int item = first_item_from(p, found, target.offset - tiles0);
  return {target.run, 1, item, target.items_before + items0 + item};
}

// A block's share of the work list: the items that start in tiles [total · block / blocks,
// total · (block + 1) / blocks) of the whole stream, so every block streams about as many
// tiles whatever the lengths in the batch.
struct WorkShare {
  WorkStart start;
  int count;
};

// By one whole warp; lane 0 also gets the part the share starts in, in `start_part`.
__device__ __forceinline__ WorkShare block_share(const DecodeParams& p, unsigned block,
                                                 unsigned blocks, RunPart& start_part) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // Lane l's pass over run l's rows, kept for the runs the share's bounds lie in.
  const RunRows held_rows = lane < p.n_runs ? scan_run(p, lane) : RunRows{};
  const RunCost held = lane < p.n_runs ? run_cost(p, lane, held_rows) : RunCost{0, 0};
  std::int64_t total = 0;
  for (int first = 0; first < p.n_runs; first += 32) {
    std::int64_t tiles = lane_run_cost(p, first, lane, held).tiles;
#pragma unroll
    for (int offset = 16; offset >= 1; offset /= 2) {
      tiles += __shfl_xor_sync(0xffffffffu, tiles, offset);
    }
    total += tiles;
  }
  // Lanes take runs 32 at a time; inclusive warp scans of their tile and item counts find the
  // runs that hold the share's first tile (target 0) and the next share's (target 1).
  const std::int64_t targets[2] = {total * block / blocks, total * (block + 1) / blocks};
  TargetRun found[2] = {{p.n_runs, 0, 0}, {p.n_runs, 0, 0}};
  bool done[2] = {false, false};
  std::int64_t base_tiles = 0, base_items = 0;
  for (int first = 0; first < p.n_runs; first += 32) {
    const RunCost cost = lane_run_cost(p, first, lane, held);
    std::int64_t tiles_incl = cost.tiles, items_incl = cost.items;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const std::int64_t t_below = __shfl_up_sync(0xffffffffu, tiles_incl, offset);
      const std::int64_t i_below = __shfl_up_sync(0xffffffffu, items_incl, offset);
      if (lane >= offset) {
        tiles_incl += t_below;
        items_incl += i_below;
      }
    }
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const unsigned hit = __ballot_sync(
          0xffffffffu, !done[t] && first + lane < p.n_runs && targets[t] < base_tiles + tiles_incl);
      if (hit == 0) continue;
      const int source = __ffs(hit) - 1;
      const std::int64_t tiles_before =
          __shfl_sync(0xffffffffu, base_tiles + tiles_incl - cost.tiles, source);
      const std::int64_t items_before =
          __shfl_sync(0xffffffffu, base_items + items_incl - cost.items, source);
      found[t] = {first + source, targets[t] - tiles_before, items_before};
      done[t] = true;
    }
    base_tiles += __shfl_sync(0xffffffffu, tiles_incl, 31);
    base_items += __shfl_sync(0xffffffffu, items_incl, 31);
  }
  // Lane t describes target t's run: both at once, from the pass of the lane that holds it (one
  // of the first 32 runs) or from a pass of its own. Past the end: run n_runs, index = the item
  // count.
  WorkStart mine{p.n_runs, 0, 0, base_items};
  const TargetRun target = lane == 0 ? found[0] : found[1];
  const bool held_run = target.run < 32;
  const RunRows target_rows = shuffle_rows(held_rows, held_run ? target.run : lane);
  if (lane < 2 && target.run < p.n_runs) {
    mine = locate_in_run(p, target, held_run ? target_rows : scan_run(p, target.run), start_part);
  }
  const WorkStart start{__shfl_sync(0xffffffffu, mine.run, 0),
                        __shfl_sync(0xffffffffu, mine.part, 0),
                        __shfl_sync(0xffffffffu, mine.item, 0),
                        __shfl_sync(0xffffffffu, mine.index, 0)};
  const std::int64_t end = __shfl_sync(0xffffffffu, mine.index, 1);
  return {start, static_cast<int>(end - start.index)};
}

}  // namespace turbodecode::cuda::decode
