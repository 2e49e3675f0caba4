#include "shard/merge_cpu.h"

#include <cstdint>

#include "common/thread_pool.h"

namespace turbodecode::shard {

void merge_cpu(const MergeArgs& args) {
  parallel_for(args.rows * args.heads, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t row = i / args.heads;
      const std::int64_t head = i % args.heads;
      const MergeTotals totals = merge_totals(args, row, head);
      float* out = args.out_row(row, head);
      for (std::int64_t d = 0; d < args.dim; ++d)
        out[d] = merged_element(args, totals, row, head, d);
      if (args.lse != nullptr) *args.lse_at(row, head) = merged_lse(totals);
    }
  });
}

}  // namespace turbodecode::shard
