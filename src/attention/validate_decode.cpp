#include "attention/validate_decode.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attention/window.h"
#include "cache/cache_view_check.h"
#include "common/cuda_runtime.h"
#include "common/index_read.h"
#include "common/validate.h"

namespace turbodecode::attention {
namespace {

// Alignment of the workspace pointer: the backends read it as f32 rows.
constexpr std::uintptr_t kWorkspaceAlignBytes = 16;

bool same_config(const KvCacheConfig& a, const KvCacheConfig& b) {
  return a.slots == b.slots && a.n_kv_heads == b.n_kv_heads && a.capacity == b.capacity &&
         a.head_dim == b.head_dim && a.kind == b.kind && a.k_format == b.k_format &&
         a.v_format == b.v_format && a.scale_factor_d512 == b.scale_factor_d512 &&
         a.device == b.device && a.page_size == b.page_size && a.pages == b.pages;
}

void check_cache(const DecodePlan& plan, const KvCacheView& cache) {
  check_arg(same_config(cache.config, plan.cache), "cache",
            "its configuration must equal the plan's");
  cache::check_cache_view(cache);
}

// The host copy of a shard's ranges (empty vectors: no shard).
struct HostShard {
  std::vector<std::int32_t> begin, end;

  ShardRange range(std::int32_t slot) const {
    if (begin.empty()) return {};
    const auto s = static_cast<std::size_t>(slot);
    return {begin[s], end[s]};
  }
};

// Each entry names a known slot, a position >= 0 and, in its slot's shard range (if any), a
// window the cache can hold.
void check_entries(const DecodePlan& plan, const std::vector<std::int32_t>& slots,
                   const std::vector<std::int32_t>& positions, const HostShard& shard) {
  const KvCacheConfig& c = plan.cache;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::string entry = "entry " + std::to_string(i) + " is ";
    check_arg(
        slots[i] >= 0 && slots[i] < c.slots, "slot_ids",
        entry + std::to_string(slots[i]) + ", must be in [0, " + std::to_string(c.slots) + ")");
    check_arg(positions[i] >= 0, "seq_pos",
              entry + std::to_string(positions[i]) + ", must be >= 0");
    const ShardRange range = shard.range(slots[i]);
    check_arg(range.begin >= 0 && range.begin <= range.end, "shard",
              "slot " + std::to_string(slots[i]) + " has the range [" +
                  std::to_string(range.begin) + ", " + std::to_string(range.end) +
                  "), must have 0 <= begin <= end");
    const Window w = query_window(plan.options.mask, positions[i], c.capacity,
                                  plan.options.sliding_window, range);
    check_arg(
        c.kind == LayerKind::ring || w.visible() == 0 || w.last_position() < c.capacity, "seq_pos",
        entry + std::to_string(positions[i]) + ", beyond the linear cache's capacity " +
            std::to_string(c.capacity) +
            (shard.begin.empty() ? ""
                                 : " from its slot's shard begin " + std::to_string(range.begin)));
  }
}

// Every run of query_tokens rows is one slot's tokens at consecutive positions (SPEC §2.8).
// A run's rows lie on one side of the last position its slot's shard holds, so their windows
// there grow or shrink along the run, never both.
void check_runs(int query_tokens, const std::vector<std::int32_t>& slots,
                const std::vector<std::int32_t>& positions, const HostShard& shard) {
  for (std::size_t first = 0; first < slots.size();
       first += static_cast<std::size_t>(query_tokens)) {
    for (std::size_t i = first + 1; i < first + static_cast<std::size_t>(query_tokens); ++i) {
      const std::string rule =
          " as entry " + std::to_string(first) +
          " (rows of a run of options.query_tokens = " + std::to_string(query_tokens) +
          " are one slot's consecutive tokens)";
      check_arg(slots[i] == slots[first], "slot_ids",
                "entry " + std::to_string(i) + " must name the same slot" + rule);
      check_arg(std::int64_t{positions[i]} == std::int64_t{positions[i - 1]} + 1, "seq_pos",
                "entry " + std::to_string(i) + " must be one more than entry " +
                    std::to_string(i - 1) + rule);
    }
    const std::size_t last = first + static_cast<std::size_t>(query_tokens) - 1;
    const std::int64_t shard_last = shard.range(slots[first]).end - 1;
    check_arg(positions[first] >= shard_last || positions[last] <= shard_last, "shard",
              "slot " + std::to_string(slots[first]) + " ends its range at " +
                  std::to_string(shard_last + 1) + ", inside the run of entries " +
                  std::to_string(first) + "…" + std::to_string(last) +
                  " (a run's tokens lie on one side of a shard's end)");
  }
}

// Marks, in `pages` (one flag per block table entry of the slot), the pages that hold the
// logical rows of absolute positions [lo, hi].
void mark_pages(const KvCacheConfig& c, std::int64_t lo, std::int64_t hi,
                std::vector<bool>& pages) {
  const auto mark = [&](std::int64_t first_row, std::int64_t last_row) {
    for (std::int64_t j = first_row / c.page_size; j <= last_row / c.page_size; ++j) {
      pages[static_cast<std::size_t>(j)] = true;
    }
  };
  if (c.kind == LayerKind::linear) return mark(lo, hi);
  if (hi - lo + 1 >= c.capacity) return mark(0, c.capacity - 1);
  const std::int64_t first = lo % c.capacity, last = hi % c.capacity;
  if (first <= last) return mark(first, last);
  mark(first, c.capacity - 1);  // the positions wrap around the ring
  mark(0, last);
}

// The block table entries the rows read (the pages their visible positions lie in) name pages
// of the cache; entries no row reads may hold anything.
void check_block_table(const DecodePlan& plan, const TensorView& table,
                       const std::vector<std::int32_t>& slots,
                       const std::vector<std::int32_t>& positions, const HostShard& shard,
                       Stream stream) {
  const KvCacheConfig& c = plan.cache;
  const auto per_slot = static_cast<std::size_t>(pages_per_slot(c));
  std::vector<std::vector<bool>> read(static_cast<std::size_t>(c.slots));
  for (std::size_t i = 0; i < slots.size(); ++i) {
    std::vector<bool>& pages = read[static_cast<std::size_t>(slots[i])];
    pages.resize(per_slot);
    const Window w = query_window(plan.options.mask, positions[i], c.capacity,
                                  plan.options.sliding_window, shard.range(slots[i]));
    if (w.visible() > 0) mark_pages(c, w.first_position(), w.last_position(), pages);
  }
  std::vector<std::int64_t> offsets;
  std::vector<std::pair<std::int64_t, std::int64_t>> entries;  // (slot, page index)
  for (std::int64_t slot = 0; slot < c.slots; ++slot) {
    const std::vector<bool>& pages = read[static_cast<std::size_t>(slot)];
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(pages.size()); ++j) {
      if (!pages[static_cast<std::size_t>(j)]) continue;
      offsets.push_back(slot * table.strides[0] + j * table.strides[1]);
      entries.emplace_back(slot, j);
    }
  }
  const std::vector<std::int32_t> values = read_elements_to_host(table, offsets, stream);
  for (std::size_t e = 0; e < values.size(); ++e) {
    check_arg(values[e] >= 0 && values[e] < c.pages, "cache.block_table",
              "entry [" + std::to_string(entries[e].first) + "][" +
                  std::to_string(entries[e].second) + "] is " + std::to_string(values[e]) +
                  ", a page the queries read; must be in [0, " + std::to_string(c.pages) + ")");
  }
}

void check_index_values(const DecodePlan& plan, const KvCacheView& cache,
                        const TensorView& slot_ids, const TensorView& seq_pos,
                        const DecodeShard& shard, Stream stream) {
  const std::vector<std::int32_t> slots = read_indices_to_host(slot_ids, stream);
  const std::vector<std::int32_t> positions = read_indices_to_host(seq_pos, stream);
  HostShard ranges;
  if (shard.begin.present()) {
    ranges.begin = read_indices_to_host(shard.begin, stream);
    ranges.end = read_indices_to_host(shard.end, stream);
  }
  check_entries(plan, slots, positions, ranges);
  check_runs(plan.options.query_tokens, slots, positions, ranges);
  if (plan.cache.page_size > 0) {
    check_block_table(plan, cache.block_table, slots, positions, ranges, stream);
  }
}

}  // namespace

void validate_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                     const TensorView& slot_ids, const TensorView& seq_pos,
                     const DecodeShard& shard, const TensorView& out, const TensorView& lse,
                     const TensorView& workspace, Stream stream) {
  const Device device = plan.cache.device;
  check_backend(device);
  check_cache(plan, cache);

  const std::int64_t heads = plan.options.n_heads;
  const std::int64_t dim = plan.cache.head_dim;
  check_rows(q, "q", device, DType::f32, {kAnyExtent, heads, dim});
  const std::int64_t n = q.shape[0];
  check_arg(n > 0, "q", "must hold at least one query row");
  check_arg(n % plan.options.query_tokens == 0, "q",
            "has " + std::to_string(n) + " rows, not a multiple of options.query_tokens (" +
                std::to_string(plan.options.query_tokens) + ")");
  check_arg(
      n <= plan.max_queries, "q",
      "has " + std::to_string(n) + " rows, the plan allows " + std::to_string(plan.max_queries));
  check_rows(out, "out", device, DType::f32, {n, heads, dim});
  if (lse.present()) check_rows(lse, "lse", device, DType::f32, {n, heads});
  check_tensor(slot_ids, "slot_ids", device, DType::i32, {n});
  check_tensor(seq_pos, "seq_pos", device, DType::i32, {n});
  check_arg(shard.begin.present() == shard.end.present(), "shard",
            "shard.begin and shard.end are given together or not at all");
  if (shard.begin.present()) {
    check_tensor(shard.begin, "shard.begin", device, DType::i32, {plan.cache.slots});
    check_tensor(shard.end, "shard.end", device, DType::i32, {plan.cache.slots});
  }
  check_rows(workspace, "workspace", device, DType::u8, {kAnyExtent});
  check_arg(workspace.shape[0] >= plan.workspace_bytes, "workspace",
            "must hold at least " + std::to_string(plan.workspace_bytes) + " bytes");
  check_arg(reinterpret_cast<std::uintptr_t>(workspace.data) % kWorkspaceAlignBytes == 0,
            "workspace", "must be 16-byte aligned");

  // out and workspace are written; nothing they cover may be read.
  const std::pair<const TensorView*, const char*> inputs[] = {
      {&q, "q"},
      {&slot_ids, "slot_ids"},
      {&seq_pos, "seq_pos"},
      {&cache.k, "cache.k"},
      {&cache.k_norms, "cache.k_norms"},
      {&cache.v, "cache.v"},
      {&cache.v_norms, "cache.v_norms"},
      {&cache.block_table, "cache.block_table"},
      {&shard.begin, "shard.begin"},
      {&shard.end, "shard.end"}};
  for (const auto& [input, name] : inputs) {
    check_disjoint(out, "out", *input, name);
    check_disjoint(workspace, "workspace", *input, name);
    if (lse.present()) check_disjoint(lse, "lse", *input, name);
  }
  check_disjoint(out, "out", workspace, "workspace");
  if (lse.present()) {
    check_disjoint(lse, "lse", out, "out");
    check_disjoint(lse, "lse", workspace, "workspace");
  }

  if (device == Device::cuda && cuda::is_capturing(stream)) return;
  check_index_values(plan, cache, slot_ids, seq_pos, shard, stream);
}

}  // namespace turbodecode::attention
