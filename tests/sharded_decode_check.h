// Sharded decode (SPEC §2.10) checked on either backend: a batch decoded over one cache holding
// every position, and over R caches that each hold a contiguous share of every slot's
// positions (appended at local positions, DecodeShard), their (out, lse) merged by
// merge_attention, and by run_sharded_decode on the threads of an in-process group. The merged
// result equals the unsharded one within shard_tolerance relative L2 per query row (the lse
// within 1e-6 relative), run_sharded_decode's equals it bitwise on every rank; outputs are
// poisoned first.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "test_support.h"
#include "turbodecode/attention.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"
#include "turbodecode/sharded_decode.h"

namespace turbodecode::testing {

// One problem: a cache configuration and options, each slot's length (its query rows are its
// last options.query_tokens positions) and, per slot, the R − 1 cut positions between ranks.
struct ShardCase {
  KvCacheConfig cache;
  DecodeOptions options;
  std::vector<std::int32_t> lengths;            // per slot
  std::vector<std::vector<std::int32_t>> cuts;  // per slot: R − 1 nondecreasing cuts

  int ranks() const { return static_cast<int>(cuts[0].size()) + 1; }
  // Rank r's range of slot s; the last rank's is open.
  std::int32_t begin(int r, std::size_t s) const { return r == 0 ? 0 : cuts[s][r - 1]; }
  std::int32_t end(int r, std::size_t s) const {
    return r + 1 == ranks() ? std::numeric_limits<std::int32_t>::max() : cuts[s][r];
  }
  std::string describe() const;
};

// Every K × V format pair and mask kind, with cuts at 0, inside the sequence, at its end and
// beyond it (ranks that hold nothing of a slot), paged and contiguous, drafts of 1–4 tokens.
std::vector<ShardCase> shard_cases(std::span<const RowFormat> k_formats,
                                   std::span<const RowFormat> v_formats, int ranks);

// The largest relative L2 over a case's rows against the unsharded decode: of the merged shares,
// and of the unsharded decode cut into other chunks.
struct ShardErrors {
  double sharded = 0.0;
  double rechunked = 0.0;
};

// How close the merged shares must be to the unsharded decode: 1e-6 (SPEC §2.10) on the CPU.
// The CUDA kernel evaluates exp(s − m) as ex2.approx((s − m)·log2 e) in f32: the rounding of the
// product alone is |s − m|·2^-24 relative, ~1e-6 for the score ranges of these cases, and it
// changes with the chunk max m, so any other split of the positions (a shard's, or the unsharded
// decode's own at another chunk size: ShardErrors::rechunked) moves rows by a few 1e-6.
double shard_tolerance(Device device);

// Runs the case on `device` with fresh random rows and queries from `seed`.
ShardErrors check_sharded_case(const ShardCase& c, Device device, std::uint64_t seed);

// Every case of shard_cases over every K and V format, for 3 ranks (and 2 on CUDA), each with
// a fresh seed (printed on failure).
void check_shard_matrix(Device device);

}  // namespace turbodecode::testing
