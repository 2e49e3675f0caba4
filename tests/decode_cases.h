// Decode problems shared by the CPU and CUDA attention tests (backend-neutral: configurations,
// options and index arrays only; the device is the caller's).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "turbodecode/attention.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::testing {

// Every row format of K and of V (SPEC §1), for the option matrices.
inline constexpr RowFormat kKFormats[] = {RowFormat::f16, RowFormat::fp8, RowFormat::tq4,
                                          RowFormat::tq8};
inline constexpr RowFormat kVFormats[] = {RowFormat::f16, RowFormat::fp8, RowFormat::tq3,
                                          RowFormat::tq4, RowFormat::tq5, RowFormat::tq6,
                                          RowFormat::tq8};

// One problem: a cache configuration, options and a batch of runs of options.query_tokens rows
// (each run one slot's tokens at consecutive positions, SPEC §2.8).
struct DecodeCase {
  KvCacheConfig cache;
  DecodeOptions options;
  std::vector<std::int32_t> slots, positions;  // one entry per query row
  std::int64_t row_padding = 0;                // floats beyond D between rows of q and out

  std::string describe() const;
};

// A configuration and options in one line, for failure messages.
std::string describe(const KvCacheConfig& cache, const DecodeOptions& options);

// Ring states a case's runs are drawn from.
enum class Visibility { causal, sliding_linear, ring_unwrapped, ring_wrapped };

// The option matrix (SPEC §5): every visibility × K format × V format runs; head dim, GQA
// ratio, KV heads, chunk size, query_tokens, page size, softcap, scale, rotated output, padded
// rows, window and lengths rotate through their values from a fixed design seed (the data of
// every case is the caller's to draw fresh). A paged case (cache.page_size > 0) has pages for
// a block table that gives every slot pages of its own.
std::vector<DecodeCase> decode_matrix(std::span<const RowFormat> k_formats,
                                      std::span<const RowFormat> v_formats);

}  // namespace turbodecode::testing
