// Double-precision decode attention (SPEC §2), written independently of the library: it
// decodes the cache's own bytes (every row format, through the block table of a paged cache),
// applies the §2.2 masks from their definition, and rotates with the Walsh-Hadamard matrix
// itself rather than a butterfly.
#pragma once

#include <cstdint>
#include <vector>

#include "turbodecode/attention.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::oracle {

struct DecodeResult {
  std::vector<double> out;  // [n, n_heads, D]: o, or R_D(o) for TQ V with options.rotated_output
  std::vector<double> lse;  // [n, n_heads]: ln Σ exp(score) over the visible positions, or −∞
};

// Decode attention of n query rows over a cache whose storage (and block table) lives on the
// host. q: [n, n_heads, D] contiguous; slot_ids, seq_pos: [n]. With options.query_tokens = t,
// rows come in runs of t of one slot at consecutive positions (SPEC §2.8; a batch that is not
// made of such runs throws std::invalid_argument); each row sees the positions up to its own.
DecodeResult decode_attention(const KvCacheView& cache, const DecodeOptions& options,
                              const std::vector<float>& q,
                              const std::vector<std::int32_t>& slot_ids,
                              const std::vector<std::int32_t>& seq_pos);

// Attention of one query token over `positions` unquantized rows, all visible: the exact
// result a quantized cache approximates. q [n_heads, D]; k, v [positions, n_kv_heads, D].
// scale 0 means 1/sqrt(D); softcap 0 is off. Returns [n_heads, D].
std::vector<double> exact_attention(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int n_heads, int n_kv_heads,
                                    int head_dim, double scale, double softcap);

}  // namespace turbodecode::oracle
