// Addressing of the decode kernel: where the row of an absolute position lives (linear or
// ring, contiguous or paged), and the copy warp's stream of a block's items into the pipeline's
// shared-memory stages.
#pragma once

#include <cstdint>

#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/decode_shape.h"
#include "attention/cuda/work_list.cuh"
#include "common/cuda/cp_async.cuh"
#include "common/cuda/pipeline_barriers.cuh"

namespace turbodecode::cuda::decode {

// The pipeline's barriers: per stage, `full` completes a phase when the copy warp's copies of
// a tile have landed, `empty` when every compute thread is done with the stage's tile.
struct StageBarriers {
  std::uint64_t* full;
  std::uint64_t* empty;
};

// Where a 16-byte chunk of staged K row `row` goes when K rows are swizzled: chunk c at
// c ^ (row mod 8), inside the same 128-byte line, so the scores' fragment loads of 8 rows hit
// distinct banks (scores.cuh).
TD_HOST_DEVICE_CONSTEXPR int swizzled_chunk(int chunk, int row) { return chunk ^ (row & 7); }

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
  return {page >= 0 && page < p.pages, page, logical & ((1u << p.page_shift) - 1u)};
}

// Copies a tile's rows of kRowBytes into `stage`, kPitch bytes apart (16-byte chunks swizzled
// when kSwizzled). Row t's byte offset from `base` comes from lane t (`offset`, 0 when the row
// is not copied: `copied`); lane l takes chunks l, l + 32, ... in row-major order.
template <int kRowBytes, int kPitch, int kTile, bool kSwizzled>
__device__ __forceinline__ void copy_rows(const unsigned char* base, std::int64_t offset,
                                          bool copied, unsigned char* stage, int lane) {
  constexpr int kChunks = kRowBytes / 16;
  static_assert(kRowBytes % 16 == 0 && (kTile * kChunks) % 32 == 0, "whole 16-byte passes");
  const auto* global = reinterpret_cast<const unsigned char*>(__cvta_generic_to_global(base));
#pragma unroll
  for (int k = 0; k < kTile * kChunks / 32; ++k) {
    const int chunk_of_tile = lane + 32 * k;
    const int t = chunk_of_tile / kChunks;
    const int chunk = chunk_of_tile % kChunks;
    const std::int64_t row_offset = __shfl_sync(0xffffffffu, offset, t);
    const bool row_copied = __shfl_sync(0xffffffffu, copied, t);
    const int target = kSwizzled ? swizzled_chunk(chunk, t) : chunk;
    copy_async_16(stage + t * kPitch + target * 16, global + row_offset + chunk * 16,
                  row_copied ? 16 : 0);
  }
}

// Issues the copies of the tile of positions [first, first + T) into a stage, from the copy
// warp: positions outside the part's visible union [lo, hi] are zero-filled, never read.
template <int D, int kColumns, RowFormat KF, RowFormat VF>
__device__ __forceinline__ void copy_tile(const DecodeParams& p, const RunPart& part,
                                          const TaskRows& rows, std::int64_t first,
                                          unsigned char* stage, int lane) {
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
  copy_rows<s.k_row_bytes, s.k_pitch, s.tile, true>(rows.k_rows, k_offset, copied,
                                                    stage + s.stage_k, lane);
  copy_rows<s.v_row_bytes, s.v_pitch, s.tile, false>(rows.v_rows, v_offset, copied,
                                                     stage + s.stage_v, lane);
  if (lane < s.tile) {
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
                                     shared + stage * s.stage_bytes, lane);
      mbarrier_arrive_after_copies(barriers.full + stage);
    }
  }
  commit_copies();
  wait_copies<0>();  // no copy outlives the warp
}

}  // namespace turbodecode::cuda::decode
