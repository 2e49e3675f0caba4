#include "attention/cpu_work.h"

#include <algorithm>
#include <cstdint>

#include "attention/window.h"

namespace turbodecode::attention {

namespace {

std::int32_t element(const TensorView& indices, std::int64_t i) {
  return indices.as<const std::int32_t>()[i * indices.strides[0]];
}

}  // namespace

std::vector<QueryRow> resolve_rows(const DecodePlan& plan, const TensorView& slot_ids,
                                   const TensorView& seq_pos, const DecodeShard& shard) {
  const std::int64_t n = slot_ids.shape[0];
  std::vector<QueryRow> rows;
  rows.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t slot = element(slot_ids, i);
    const std::int32_t position = element(seq_pos, i);
    const ShardRange range = shard.begin.present()
                                 ? ShardRange{element(shard.begin, slot), element(shard.end, slot)}
                                 : ShardRange{};
    const Window w = query_window(plan.options.mask, position, plan.cache.capacity,
                                  plan.options.sliding_window, range);
    rows.push_back(
        {slot, w.first_position(), w.last_position(), plan.chunk_positions(w.visible())});
  }
  return rows;
}

std::vector<WorkItem> work_items(const DecodePlan& plan, const std::vector<QueryRow>& rows) {
  const auto n = static_cast<std::int64_t>(rows.size());
  const int run_length = plan.options.query_tokens;
  std::vector<WorkItem> items;
  for (std::int64_t run = 0; run < n; run += run_length) {
    for (std::int64_t first = run; first < run + run_length;) {
      std::int64_t end = first + 1;
      while (end < run + run_length && rows[end].chunk == rows[first].chunk) ++end;
      const auto count = static_cast<int>(end - first);
      // The chunks the rows meet (rows that see nothing of a shard meet none).
      std::int64_t lo_chunk = INT64_MAX, hi_chunk = -1;
      for (std::int64_t r = first; r < end; ++r) {
        if (rows[r].sees_nothing()) continue;
        lo_chunk = std::min(lo_chunk, rows[r].first_chunk());
        hi_chunk = std::max(hi_chunk, rows[r].last_chunk());
      }
      for (int kv_head = 0; kv_head < plan.cache.n_kv_heads; ++kv_head) {
        for (std::int64_t c = lo_chunk; c <= hi_chunk; ++c) {
          items.push_back({first, count, kv_head, c});
        }
      }
      first = end;
    }
  }
  return items;
}

}  // namespace turbodecode::attention
