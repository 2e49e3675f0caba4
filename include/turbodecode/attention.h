// Single-token decode attention over a KvCache (SPEC §2), with a FlashInfer-style split:
// plan_decode validates and sizes on the host once, run_decode only computes.
#pragma once

#include <cstdint>

#include "turbodecode/kv_cache.h"
#include "turbodecode/mask_kind.h"
#include "turbodecode/tensor.h"

namespace turbodecode {

struct DecodeOptions {
  int n_heads = 0;                   // query heads; a multiple of the cache's n_kv_heads
  float scale = 0.0f;                // score scale; 0 means 1/sqrt(D) (Gemma passes 1.0)
  float softcap = 0.0f;              // 0 = off; else s = softcap·tanh(s/softcap)
  MaskKind mask = MaskKind::causal;  // which positions a query sees (mask_kind.h)
  std::int64_t sliding_window = 0;   // 0 = whole ring/sequence
  // With TQ V the attention sum lives in the rotated basis. false (default): the library
  // returns o = R_D⁻¹(sum). true: it returns r = R_D(o) and the caller folds the inverse into
  // its output projection: o = R_D⁻¹ r, i.e. W_o·o = (W_o·R_D⁻¹)·r with
  // R_D⁻¹(y) = s ⊙ (H_D·y/√D). Ignored for F16 V.
  bool rotated_output = false;
  // 0: each query's split count comes from its own length and the device (batch invariant).
  // > 0: every query uses exactly this many splits (tests and benchmarks).
  int fixed_splits = 0;
};

struct DecodePlan {
  KvCacheConfig cache;
  DecodeOptions options;
  std::int64_t max_queries = 0;
  int max_splits = 1;                 // upper bound of any query's split count
  std::int64_t min_split_tokens = 1;  // a split covers at least this many positions (unless forced)
  int target_splits = 1;              // splits of a long query: enough blocks to fill the device
  std::int64_t workspace_bytes = 0;   // size of the `workspace` argument of run_decode

  // Number of splits a query that sees `visible` positions is cut into. Depends only on that
  // length and the plan, never on other queries (SPEC §2.6 batch invariance).
  int splits_for_length(std::int64_t visible) const;
};

// Validates the cache configuration and options, picks the split policy for the cache's
// device and sizes the workspace for up to `max_queries` query rows per run
// (max_queries · n_heads at most 2^24).
DecodePlan plan_decode(const KvCacheConfig& cache, const DecodeOptions& options,
                       std::int64_t max_queries);

// q [n, n_heads, D] f32 (raw, unrotated); slot_ids, seq_pos [n] i32 (each token already
// appended); out [n, n_heads, D] f32; workspace u8 [>= plan.workspace_bytes]. Everything on the
// cache's device. n <= plan.max_queries. Index values are checked on the host before launch,
// except while a CUDA stream is being captured into a graph: then rows naming an unknown slot
// or an out-of-range position are written as NaN and nothing outside the cache is read.
void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                const TensorView& workspace, Stream stream = {});

}  // namespace turbodecode
