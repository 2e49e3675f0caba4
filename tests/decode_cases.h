// Decode problems shared by the CPU and CUDA attention tests (backend-neutral: configurations,
// options and index arrays only; the device is the caller's).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "turbodecode/attention.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::testing {

// One problem: a cache configuration, options and a batch of runs of options.query_tokens rows
// (each run one slot's tokens at consecutive positions, SPEC §2.8).
struct DecodeCase {
  KvCacheConfig cache;
  DecodeOptions options;
  std::vector<std::int32_t> slots, positions;  // one entry per query row
  std::int64_t row_padding = 0;                // floats beyond D between rows of q and out

  std::string describe() const;
};

// Ring states a case's runs are drawn from.
enum class Visibility { causal, sliding_linear, ring_unwrapped, ring_wrapped };

// The option matrix (SPEC §5): every visibility × K format × V format runs; head dim, GQA
// ratio, KV heads, chunk size, query_tokens, page size, softcap, scale, rotated output, padded
// rows, window and lengths rotate through their values from a fixed design seed (the data of
// every case is the caller's to draw fresh). Paged cases (cache.page_size > 0) need a block
// table: random_block_table.
std::vector<DecodeCase> decode_matrix(std::span<const RowFormat> k_formats,
                                      std::span<const RowFormat> v_formats);

// A block table for a paged cache, i32 [slots, pages_per_slot]: every slot's pages drawn
// without replacement from a shuffled pool, except that slots after the first share the first
// `shared_pages` pages of slot 0 (a shared prefix). config.pages must be large enough:
// pages_needed(config, shared_pages).
std::vector<std::int32_t> random_block_table(const KvCacheConfig& config, int shared_pages,
                                             std::mt19937_64& rng);
std::int64_t pages_needed(const KvCacheConfig& config, int shared_pages);

}  // namespace turbodecode::testing
