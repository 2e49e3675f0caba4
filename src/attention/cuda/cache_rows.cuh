// Addressing of the decode kernel: where the row of an absolute position lives (linear or
// ring, contiguous or paged), and the copy warp's stream of a block's items into the pipeline's
// shared-memory stages.
#pragma once

#include <cstdint>

#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/decode_shape.h"
#include "attention/cuda/work_list.cuh"
#include "cache/row_location.h"
#include "common/cuda/cp_async.cuh"
#include "common/cuda/pipeline_barriers.cuh"

namespace turbodecode::cuda::decode {

// The pipeline's barriers: per stage, `full` completes a phase when the copy warp's copies of
// a tile have landed, `empty` when every compute thread is done with the stage's tile.
struct StageBarriers {
  std::uint64_t* full;
  std::uint64_t* empty;
};

// The rows of one task: the slot's pages (or its contiguous region) for one KV head.
struct TaskRows {
  const unsigned char* k_rows;
  const unsigned char* v_rows;
  const float* k_scales;
  const float* v_scales;
  const std::int32_t* table;  // the slot's block-table row; null when contiguous
  std::int64_t slot;
};

__device__ __forceinline__ TaskRows task_rows(const DecodeParams& p, const RunPart& part,
                                              int kv_head) {
  return {p.k.rows + kv_head * p.k.head_bytes,
          p.v.rows + kv_head * p.v.head_bytes,
          p.k.scales + kv_head * p.k.scale_head,
          p.v.scales + kv_head * p.v.scale_head,
          p.block_table ? p.block_table + part.slot * p.table_stride : nullptr,
          part.slot};
}

// Page and row within the page of the token at `position`, or !valid when a block-table entry
// names no page of the cache (only possible while a graph replays: the host checks tables).
struct RowPlace {
  bool valid;
  std::int64_t page;
  unsigned row;
};

__device__ __forceinline__ RowPlace place_of(const DecodeParams& p, const TaskRows& rows,
                                             std::int64_t position) {
  // Positions and capacities fit 31 bits (i32 indices): a 32-bit remainder.
  const unsigned logical = p.ring ? static_cast<unsigned>(position) % static_cast<unsigned>(p.capacity)
                                  : static_cast<unsigned>(position);
  if (rows.table == nullptr) return {true, rows.slot, logical};
  const std::int64_t page = rows.table[logical >> p.page_shift];
  return {cache::RowAddressing::names_block(page, p.pages), page,
          logical & ((1u << p.page_shift) - 1u)};
}

// Copies `rows` consecutive rows of kRowBytes that follow each other in global memory (at
// `global`, `stride` bytes apart) into a stage, kPitch bytes apart: 16-byte cp.async, the
// warp's lanes on consecutive chunks, so each instruction reads whole rows.
template <int kRowBytes, int kPitch, int kRows>
__device__ __forceinline__ void copy_row_span(unsigned char* stage, const unsigned char* global,
                                              std::int64_t stride, int lane) {
  constexpr int kChunks = kRowBytes / 16;
  static_assert(kRowBytes % 16 == 0 && (kRows * kChunks) % 32 == 0, "whole 16-byte passes");
#pragma unroll
  for (int k = 0; k < kRows * kChunks / 32; ++k) {
    const int index = lane + 32 * k;
    const int row = index / kChunks;
    const int chunk = index % kChunks;
    copy_async_16(stage + row * kPitch + chunk * 16, global + row * stride + chunk * 16, 16);
  }
}

// Issues the copies of the tile of positions [first, first + T) into a stage, from the copy
// warp. Lane t finds row t. When every row of the tile is there and the K and V rows of each
// 16-row span follow each other in memory (a contiguous cache, or pages of 16 rows or more:
// the common case), the warp copies each span with 16-byte cp.async at consecutive addresses.
// Else lane t copies its K and V rows with one bulk copy each (counted in bytes against the
// stage's full barrier; the hardware serialises a warp's bulk copies, so this is the slower
// path); a row outside the part's visible union [lo, hi] is never read: its V row is
// zero-filled (its weight is 0, and 0 times a stale value could be NaN), its K row left as it
// is (its score is masked before use). Scales always go by cp.async, zero for a row not
// copied.
template <int D, int kColumns, RowFormat KF, RowFormat VF>
__device__ __forceinline__ void copy_tile(const DecodeParams& p, const RunPart& part,
                                          const TaskRows& rows, std::int64_t first,
                                          unsigned char* stage, std::uint64_t* full, int lane) {
  constexpr DecodeShape s(D, kColumns, KF, VF);
  const std::int64_t position = first + lane;
  bool copied = false;
  std::int64_t k_offset = 0, v_offset = 0, k_scale = 0, v_scale = 0;
  if (lane < s.tile && position >= part.lo && position <= part.hi) {
    const RowPlace place = place_of(p, rows, position);
    copied = place.valid;
    if (copied) {
      k_offset = place.page * p.k.page_bytes + place.row * p.k.row_bytes;
      v_offset = place.page * p.v.page_bytes + place.row * p.v.row_bytes;
      k_scale = place.page * p.k.scale_page + place.row * p.k.scale_row;
      v_scale = place.page * p.v.scale_page + place.row * p.v.scale_row;
    }
  }
  // Spans of 16 rows: the smallest page holds one whole, and a tile starts on a span.
  constexpr int kSpan = 16;
  const int span_lane = lane & ~(kSpan - 1);
  const std::int64_t k_first = __shfl_sync(0xffffffffu, k_offset, span_lane);
  const std::int64_t v_first = __shfl_sync(0xffffffffu, v_offset, span_lane);
  const int in_span = lane - span_lane;
  const bool in_order =
      lane >= s.tile || (copied && k_offset == k_first + in_span * p.k.row_bytes &&
                         v_offset == v_first + in_span * p.v.row_bytes);
  if (__all_sync(0xffffffffu, in_order)) {
#pragma unroll
    for (int span = 0; span < s.tile / kSpan; ++span) {
      const std::int64_t k_span = __shfl_sync(0xffffffffu, k_first, span * kSpan);
      const std::int64_t v_span = __shfl_sync(0xffffffffu, v_first, span * kSpan);
      copy_row_span<s.k_row_bytes, s.k_pitch, kSpan>(stage + s.stage_k + span * kSpan * s.k_pitch,
                                                      rows.k_rows + k_span, p.k.row_bytes, lane);
      copy_row_span<s.v_row_bytes, s.v_pitch, kSpan>(stage + s.stage_v + span * kSpan * s.v_pitch,
                                                      rows.v_rows + v_span, p.v.row_bytes, lane);
    }
  } else {
    const unsigned copied_rows = __popc(__ballot_sync(0xffffffffu, copied));
    if (lane == 0) {
      mbarrier_expect_bytes(full, copied_rows * (s.k_row_bytes + s.v_row_bytes));
    }
    __syncwarp();
    unsigned char* v_row = stage + s.stage_v + lane * s.v_pitch;
    if (copied) {
      copy_bulk(stage + s.stage_k + lane * s.k_pitch, rows.k_rows + k_offset, s.k_row_bytes,
                full);
      copy_bulk(v_row, rows.v_rows + v_offset, s.v_row_bytes, full);
    } else if (lane < s.tile) {
#pragma unroll
      for (int chunk = 0; chunk < s.v_row_bytes / 16; ++chunk) {
        copy_async_16(v_row + 16 * chunk, rows.v_rows, 0);
      }
    }
  }
  if (lane >= s.tile) return;
  auto* k_scales = reinterpret_cast<float*>(stage + s.stage_k_scales);
  auto* v_scales = reinterpret_cast<float*>(stage + s.stage_v_scales);
#pragma unroll
  for (int i = 0; i < s.k_scales; ++i) {
    copy_async_4(k_scales + lane * s.k_scales + i, rows.k_scales + k_scale + i, copied);
  }
#pragma unroll
  for (int i = 0; i < s.v_scales; ++i) {
    copy_async_4(v_scales + lane * s.v_scales + i, rows.v_scales + v_scale + i, copied);
  }
}

// The copy warp: streams the tiles of the block's `count` items, from `cursor`, through the
// stages, refilling each as soon as the compute warps release it.
template <int D, int kColumns, RowFormat KF, RowFormat VF>
__device__ __forceinline__ void stream_items(const DecodeParams& p, WorkCursor cursor, int count,
                                             unsigned char* shared,
                                             const StageBarriers& barriers) {
  constexpr DecodeShape s(D, kColumns, KF, VF);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  int tile = 0;  // tiles streamed so far: the stage and its phase
  for (int n = 0; n < count; ++n, cursor.advance(p)) {
    if (!cursor.part.valid) continue;
    const WorkItem item = item_of(cursor.part, cursor.item);
    const TaskRows rows = task_rows(p, cursor.part, item.kv_head);
    const ItemRange range = item_range(cursor.part, item);
    for (std::int64_t first = range.from / s.tile * s.tile; first <= range.to;
         first += s.tile, ++tile) {
      const int stage = tile % s.stages;
      if (tile >= s.stages) mbarrier_wait(barriers.empty + stage, (tile / s.stages - 1) & 1);
      copy_tile<D, kColumns, KF, VF>(p, cursor.part, rows, first,
                                     shared + stage * s.stage_bytes, barriers.full + stage, lane);
      mbarrier_arrive_after_copies(barriers.full + stage);
    }
  }
  commit_copies();
  wait_copies<0>();  // no copy outlives the warp
}

}  // namespace turbodecode::cuda::decode
