// Arguments of the CUDA decode kernel, resolved on the host from the validated views, and the
// layout of its workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention/chunks.h"
#include "turbodecode/mask_kind.h"

namespace turbodecode::cuda::decode {

// Chunks merged in one first-level group (chunk_merge.cuh): chunk j of a row belongs to group
// j / merge_group(D), so a row's merge tree depends only on its own positions and the head dim.
// Measured with 16/8 heads at D 256 (two query columns per block, which the four compute warps
// fold together) and 16/2 at D 512 (eight columns, which each warp folds alone, two of them one
// after the other): at D 256 a group of 32 keeps rows up to 4K positions to one merge level; at
// D 512 groups of 8 spread the serial folds over more blocks.
__host__ __device__ constexpr int merge_group(int head_dim) { return head_dim == 512 ? 8 : 32; }

// One side (K or V) of the cache. Rows are addressed as (page, KV head, row in page): a
// contiguous cache is the paged layout with one page per slot.
struct CacheSide {
  const unsigned char* rows = nullptr;
  const float* scales = nullptr;  // FP8 scales or TQ norms; null for F16 rows
  std::int64_t page_bytes = 0, head_bytes = 0, row_bytes = 0;  // byte strides of rows
  std::int64_t scale_page = 0, scale_head = 0, scale_row = 0;  // element strides of scales
  int bits = 0;                                                // TQ codebook width
};

struct DecodeParams {
  CacheSide k, v;
  // Paged caches: block_table[slot · table_stride + j] is the page of logical rows
  // [j·P, (j + 1)·P), P = 1 << page_shift. Null for a contiguous cache (page = slot).
  const std::int32_t* block_table = nullptr;
  std::int64_t table_stride = 0;
  int page_shift = 0;
  std::int64_t pages = 0;  // pages a table entry may name (slots when contiguous)
  std::int64_t slots = 0;
  std::int64_t capacity = 0;
  bool ring = false;
  MaskKind mask = MaskKind::causal;
  std::int64_t sliding_window = 0;

  const float* q = nullptr;  // [n_rows, n_heads, D]
  std::int64_t q_stride[2] = {};
  const std::int32_t* slot_ids = nullptr;
  const std::int32_t* seq_pos = nullptr;
  std::int64_t slot_stride = 1, pos_stride = 1;
  // A sharded decode's ranges per slot (DecodeShard); null: every slot holds its whole sequence.
  const std::int32_t* shard_begin = nullptr;
  const std::int32_t* shard_end = nullptr;
  std::int64_t shard_begin_stride = 1, shard_end_stride = 1;
  float* out = nullptr;  // [n_rows, n_heads, D]
  std::int64_t out_stride[2] = {};
  float* lse = nullptr;  // [n_rows, n_heads] or null
  std::int64_t lse_stride[2] = {};

  int n_rows = 0;
  int query_tokens = 1;  // rows per run
  int n_runs = 0;
  int parts_per_run = 1;  // 2 when a run may straddle a chunk-size threshold
  int n_heads = 0;
  int n_kv_heads = 0;
  int group = 1;          // query heads per KV head
  int columns = 2;        // query columns per block (the kernel instance's)
  int tile = 32;          // positions per tile of the instance (decode_shape.h)
  int column_chunks = 1;  // most blocks of columns a run's part needs per KV head
  attention::ChunkPolicy chunk_policy;
  int task_chunks = 1;  // chunk states a task may hold (max_chunks + 1)
  int task_groups = 1;  // first-level merge groups a task may hold
  int blocks = 1;       // blocks of the persistent launch

  float* state_o = nullptr;      // [tasks, task_chunks, columns, D]
  float2* state_ml = nullptr;    // [tasks, task_chunks, columns]
  float* group_o = nullptr;      // [tasks, task_groups, columns, D]
  float2* group_ml = nullptr;    // [tasks, task_groups, columns]
  unsigned* counters = nullptr;  // [tasks, 1 + task_groups]: finished groups, then chunks per group

  float scale = 1.0f;
  float softcap = 0.0f;
  float scale_factor_d512 = 1.0f;
  bool unrotate_output = false;
};

// Workspace (choice): the completion counters first (they must be zero before the first run;
// every run leaves them zero), then chunk states, then first-level group states, each
// 256-byte aligned.
struct WorkspaceLayout {
  std::int64_t counter_bytes, state_ml_bytes, state_o_bytes, group_ml_bytes, group_o_bytes;

  __host__ __device__ WorkspaceLayout(std::int64_t tasks, int task_chunks, int task_groups,
                                      int columns, int head_dim) {
    const std::int64_t chunk_states = tasks * task_chunks * columns;
    const std::int64_t group_states = tasks * task_groups * columns;
    counter_bytes = aligned(tasks * (1 + task_groups) * 4);
    state_ml_bytes = aligned(chunk_states * 8);
    state_o_bytes = aligned(chunk_states * head_dim * 4);
    group_ml_bytes = aligned(group_states * 8);
    group_o_bytes = aligned(group_states * head_dim * 4);
  }
  __host__ __device__ std::int64_t bytes() const {
    return counter_bytes + state_ml_bytes + state_o_bytes + group_ml_bytes + group_o_bytes;
  }

 private:
  __host__ __device__ static std::int64_t aligned(std::int64_t bytes) {
    return (bytes + 255) / 256 * 256;
  }
};

}  // namespace turbodecode::cuda::decode
