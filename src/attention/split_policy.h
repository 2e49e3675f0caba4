// How a query's visible positions are cut into splits (SPEC §2.5, §2.6). Shared by the
// planner, the CPU backend and the CUDA kernels, so both backends split identically.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace turbodecode::attention {

struct SplitPolicy {
  int max_splits = 1;                 // no query gets more
  std::int64_t min_split_tokens = 1;  // a split covers at least this many positions
  int target_splits = 1;              // what a long query gets: fills the device by itself
  int fixed_splits = 0;               // > 0 overrides everything (tests, benchmarks)
};

// Depends on the query's own visible length only: batch invariance.
TD_HOST_DEVICE int splits_for_length(const SplitPolicy& policy, std::int64_t visible) {
  if (policy.fixed_splits > 0) return policy.fixed_splits;
  if (visible <= policy.min_split_tokens) return 1;
  const std::int64_t by_length = (visible + policy.min_split_tokens - 1) / policy.min_split_tokens;
  return static_cast<int>(by_length < policy.target_splits ? by_length : policy.target_splits);
}

// Split `split` of `splits` covers logical offsets [begin, end) of the `visible` positions;
// chunks are equal up to the last, and trailing splits may be empty (begin == end).
struct SplitRange {
  std::int64_t begin;
  std::int64_t end;
};

TD_HOST_DEVICE SplitRange split_range(std::int64_t visible, int splits, int split,
                                      std::int64_t align) {
  std::int64_t chunk = (visible + splits - 1) / splits;
  chunk = (chunk + align - 1) / align * align;
  std::int64_t begin = chunk * split;
  begin = begin < visible ? begin : visible;
  std::int64_t end = begin + chunk;
  end = end < visible ? end : visible;
  return {begin, end};
}

}  // namespace turbodecode::attention
