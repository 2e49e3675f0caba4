// Arguments of the CUDA decode kernels, resolved on the host from the validated views, and the
// per-query facts (slot, visible window, split count) both kernels derive from device memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention/cuda/row_codec.h"
#include "attention/split_policy.h"
#include "attention/window.h"

namespace turbodecode::cuda::decode {

// Split boundaries fall on multiples of this many positions, as on the CPU backend, so both
// backends cut a query identically (split_policy.h).
inline constexpr std::int64_t kSplitAlign = 32;
// Most splits a query may have on CUDA (the merge keeps one weight per split in shared
// memory); equals the largest fixed_splits plan_decode accepts.
inline constexpr int kMaxSplits = 1024;

// One side (K or V) of the cache.
struct CacheSide {
  const unsigned char* rows = nullptr;
  const float* norms = nullptr;      // TQ only
  std::int64_t row_stride_bytes[3];  // between slots, KV heads, rows
  std::int64_t norm_stride[3];       // floats, same dimensions
  int bits = 0;                      // codebook width (TQ only)
};

struct DecodeParams {
  CacheSide k, v;
  const float* q = nullptr;  // [n_queries, n_heads, D]
  std::int64_t q_stride[2];  // elements between queries, heads
  const std::int32_t* slot_ids = nullptr;
  const std::int32_t* seq_pos = nullptr;
  std::int64_t slot_stride = 1, pos_stride = 1;
  float* out = nullptr;  // [n_queries, n_heads, D]
  std::int64_t out_stride[2];
  float* partial_o = nullptr;    // [max_queries, n_heads, max_splits, D]
  float2* partial_ml = nullptr;  // [max_queries, n_heads, max_splits]: (m, l)
  std::int64_t slots = 0;
  std::int64_t capacity = 0;
  bool linear_cache = true;
  MaskKind mask = MaskKind::causal;
  std::int64_t sliding_window = 0;
  attention::SplitPolicy policy;
  int max_splits = 1;
  int n_heads = 0;
  int group = 1;            // query heads per KV head
  int heads_per_block = 1;  // query heads one split block serves (a power of two <= 8)
  int head_chunks = 1;      // blocks per (query, KV head, split): ceil(group / heads_per_block)
  float scale = 1.0f;
  float softcap = 0.0f;
  float scale_factor_d512 = 1.0f;
  bool unrotate_output = false;
};

// Workspace layout (choice): partial O rows first, then the (m, l) pairs, 256-byte aligned.
struct WorkspaceLayout {
  std::int64_t partial_o_bytes;
  std::int64_t partial_ml_bytes;

  __host__ __device__ WorkspaceLayout(std::int64_t max_queries, int n_heads, int max_splits,
                                      int head_dim) {
    const std::int64_t states = max_queries * n_heads * max_splits;
    partial_o_bytes = aligned(states * head_dim * static_cast<std::int64_t>(sizeof(float)));
    partial_ml_bytes = aligned(states * static_cast<std::int64_t>(sizeof(float2)));
  }
  __host__ __device__ std::int64_t bytes() const { return partial_o_bytes + partial_ml_bytes; }

 private:
  __host__ __device__ static std::int64_t aligned(std::int64_t bytes) {
    return (bytes + 255) / 256 * 256;
  }
};

// What a query row sees, read from device memory at run time (graph replay).
struct QueryRows {
  bool valid;  // false: unknown slot or impossible position; the row is written as NaN
  std::int64_t slot;
  attention::Window window;
  int splits;
};

__device__ __forceinline__ QueryRows resolve_query(const DecodeParams& p, std::int64_t query) {
  QueryRows r{};
  r.slot = p.slot_ids[query * p.slot_stride];
  const std::int64_t pos = p.seq_pos[query * p.pos_stride];
  r.valid = r.slot >= 0 && r.slot < p.slots && pos >= 0 && (!p.linear_cache || pos < p.capacity);
  if (!r.valid) return r;
  r.window = attention::query_window(p.mask, pos, p.capacity, p.sliding_window);
  const int splits = attention::splits_for_length(p.policy, r.window.visible());
  r.splits = splits < p.max_splits ? splits : p.max_splits;
  return r;
}

}  // namespace turbodecode::cuda::decode
