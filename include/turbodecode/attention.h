// Decode attention over a KvCache (SPEC §2), with a FlashInfer-style split: plan_decode
// validates and sizes on the host once, run_decode only computes.
#pragma once

#include <cstdint>

#include "turbodecode/kv_cache.h"
#include "turbodecode/mask_kind.h"
#include "turbodecode/tensor.h"

namespace turbodecode {

// Most query rows per slot in one call (DecodeOptions::query_tokens).
inline constexpr int kMaxQueryTokens = 8;

struct DecodeOptions {
  int n_heads = 0;                   // query heads; a multiple of the cache's n_kv_heads
  float scale = 0.0f;                // score scale; 0 means 1/sqrt(D) (Gemma passes 1.0)
  float softcap = 0.0f;              // 0 = off; else s = softcap·tanh(s/softcap)
  MaskKind mask = MaskKind::causal;  // which positions a query sees (mask_kind.h)
  std::int64_t sliding_window = 0;   // 0 = whole ring/sequence
  // With TQ V the attention sum lives in the rotated basis. false (default): the library
  // returns o = R_D⁻¹(sum). true: it returns r = R_D(o) and the caller folds the inverse into
  // its output projection: o = R_D⁻¹ r, i.e. W_o·o = (W_o·R_D⁻¹)·r with
  // R_D⁻¹(y) = s ⊙ (H_D·y/√D). Ignored unless V is a TurboQuant format.
  bool rotated_output = false;
  // Query rows per slot (SPEC §2.8, speculative-decode verification): the batch is made of
  // runs of this many consecutive rows, each run the tokens of one slot at consecutive
  // positions; a row sees the positions up to its own. The KV rows of a run are read once for
  // all its rows, and every row's result is bitwise the one it gets in a run of its own.
  // 1 … kMaxQueryTokens. On a ring layer, needs sliding_window > 0 and
  // capacity >= sliding_window + query_tokens − 1 (a draft's later tokens must not overwrite
  // rows its earlier tokens see).
  int query_tokens = 1;
  // 0: a row's chunk size comes from its own length and the device (batch invariant).
  // > 0, a multiple of 32: every row is cut into chunks of exactly this many positions (tests
  // and benchmarks).
  std::int64_t fixed_chunk_positions = 0;
};

struct DecodePlan {
  KvCacheConfig cache;
  DecodeOptions options;
  std::int64_t max_queries = 0;
  // How a row's visible positions are cut into chunks, each a unit of work with a softmax
  // state of its own (SPEC §2.5): chunk j of a row holds its visible positions in
  // [j·C, (j + 1)·C), aligned on absolute positions, with C = min_chunk_positions · 2^k: doubled
  // while the row would have more than 32 chunks and C is below spread_chunk_positions, then
  // while it would have more than max_chunks.
  std::int64_t min_chunk_positions = 32;
  int max_chunks = 1;
  std::int64_t spread_chunk_positions = 32;
  std::int64_t workspace_bytes = 0;  // size of the `workspace` argument of run_decode
  // CUDA: blocks of the persistent decode launch (SMs × resident blocks of its kernel).
  int device_blocks = 0;

  // Positions per chunk of a row that sees `visible` positions. Depends only on that length
  // and the plan, never on other rows (SPEC §2.6 batch invariance).
  std::int64_t chunk_positions(std::int64_t visible) const;
};

// One rank's share of every slot's positions in a sharded decode (SPEC §2.10): slot s holds the
// tokens at absolute positions [begin[s], end[s]), stored where an unsharded cache stores
// positions [0, end[s] − begin[s]) (the rank appends the token at position p as p − begin[s]).
// A query at absolute position p sees the positions it sees unsharded that lie in its slot's
// range; a query that sees none of them gets zeros and lse −inf. i32 [slots] each, on the
// cache's device and read there at run time like seq_pos (a captured graph replays with new
// values), 0 <= begin <= end; end = INT32_MAX leaves a range open (the rank holding the newest
// tokens). Absent views (the default): every slot holds its whole sequence.
struct DecodeShard {
  TensorView begin;
  TensorView end;
};

// Validates the cache configuration and options, picks the chunk policy for the cache's device
// and sizes the workspace for up to `max_queries` query rows per run
// (max_queries · n_heads at most 2^24).
DecodePlan plan_decode(const KvCacheConfig& cache, const DecodeOptions& options,
                       std::int64_t max_queries);

// q [n, n_heads, D] f32 (raw, unrotated); slot_ids, seq_pos [n] i32 (each token already
// appended; n a multiple of query_tokens); out [n, n_heads, D] f32; workspace u8
// [>= plan.workspace_bytes], zero-filled before its first run (the CUDA backend keeps completion
// counters there, which every run leaves at zero again; e.g. Buffer::fill_bytes(0) once).
// Everything on the cache's device, n <= plan.max_queries.
// lse (optional: an absent view writes none) [n, n_heads] f32: the natural log of
// Σ exp(score) over the row's visible positions, scores after scale and softcap, −inf for a row
// that sees nothing (SPEC §2.9); partial results over disjoint positions merge exactly with it.
// Index values (and a paged cache's block table) are checked on the host before launch,
// except while a CUDA stream is being captured into a graph: then rows naming an unknown slot,
// an out-of-range position or a page outside the cache are written as NaN and nothing outside
// the cache is read. `shard`: the rank's share of the positions (DecodeShard); a row whose
// shard range is invalid is written as NaN, like one naming an unknown slot.
void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const DecodeShard& shard,
                const TensorView& out, const TensorView& lse, const TensorView& workspace,
                Stream stream = {});
void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                const TensorView& lse, const TensorView& workspace, Stream stream = {});
void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                const TensorView& workspace, Stream stream = {});

}  // namespace turbodecode
