// Double-precision decode attention (SPEC §2), written independently of the library: it
// decodes the cache's own bytes, applies the §2.2 masks from their definition, and rotates
// with the Walsh-Hadamard matrix itself rather than a butterfly.
#pragma once

#include <cstdint>
#include <vector>

#include "turbodecode/attention.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::oracle {

// Decode attention of n queries over a cache whose storage lives on the host.
// q: [n, n_heads, D] contiguous; slot_ids, seq_pos: [n]. Returns [n, n_heads, D]: o, or
// R_D(o) when V is TQ and options.rotated_output is set. With `lse`, also fills it with
// [n, n_heads] log Σ exp(score) over each row's visible positions (SPEC §2.9). Each row is
// computed on its own from its position: a run of options.query_tokens rows (SPEC §2.8)
// means nothing more than that.
std::vector<double> decode_attention(const KvCacheView& cache, const DecodeOptions& options,
                                     const std::vector<float>& q,
                                     const std::vector<std::int32_t>& slot_ids,
                                     const std::vector<std::int32_t>& seq_pos,
                                     std::vector<double>* lse = nullptr);

// Attention of one query token over `positions` unquantized rows, all visible: the exact
// result a quantized cache approximates. q [n_heads, D]; k, v [positions, n_kv_heads, D].
// scale 0 means 1/sqrt(D); softcap 0 is off. Returns [n_heads, D].
std::vector<double> exact_attention(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int n_heads, int n_kv_heads,
                                    int head_dim, double scale, double softcap);

}  // namespace turbodecode::oracle
