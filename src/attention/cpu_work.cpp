#include "attention/cpu_work.h"

#include "attention/window.h"

namespace turbodecode::attention {

std::vector<QueryRow> resolve_rows(const DecodePlan& plan, const TensorView& slot_ids,
                                   const TensorView& seq_pos) {
  const std::int64_t n = slot_ids.shape[0];
  std::vector<QueryRow> rows;
  rows.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t slot = slot_ids.as<const std::int32_t>()[i * slot_ids.strides[0]];
    const std::int32_t position = seq_pos.as<const std::int32_t>()[i * seq_pos.strides[0]];
    const Window w =
        query_window(plan.options.mask, position, plan.cache.capacity, plan.options.sliding_window);
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
      for (int kv_head = 0; kv_head < plan.cache.n_kv_heads; ++kv_head) {
        for (std::int64_t c = rows[first].first_chunk(); c <= rows[end - 1].last_chunk(); ++c) {
          items.push_back({first, count, kv_head, c});
        }
      }
      first = end;
    }
  }
  return items;
}

}  // namespace turbodecode::attention
