// append_kv, and plan_decode + run_decode, on caches whose views and configuration the fuzzer
// may break (contiguous or paged, with a block table it fills), with index values it picks.
#include <vector>

#include "api/calls.h"
#include "api/operands.h"
#include "turbodecode/attention.h"
#include "turbodecode/error.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::fuzz {
namespace {

constexpr std::int64_t kHuge = std::int64_t{1} << 40;

KvCacheConfig pick_config(FuzzedDataProvider& data) {
  KvCacheConfig c;
  c.slots = pick<std::int64_t>(data, 1, 3, {0, -1, kHuge, INT32_MAX + std::int64_t{1}});
  c.n_kv_heads = pick(data, 1, 2, {0, -2, 1 << 30});
  c.capacity = pick<std::int64_t>(data, 1, 40, {0, -5, INT32_MAX, kHuge});
  const int dim_choice = pick(data, 0, 1, {128, -256, 1 << 30});
  c.head_dim = dim_choice == 0 ? 256 : dim_choice == 1 ? 512 : dim_choice;
  c.kind = static_cast<LayerKind>(pick(data, 0, 1, {2, 255}));
  c.k_format = static_cast<RowFormat>(pick(data, 0, 6, {7, 200}));
  c.v_format = static_cast<RowFormat>(pick(data, 0, 6, {7, 200}));
  c.scale_factor_d512 = pick_float(data, {1.0f, 2.0f});
  c.device = static_cast<Device>(pick(data, 0, 0, {1}));
  // Contiguous, or paged in pages of 16 or 32 rows; now and then a page size no cache takes.
  const int paging = pick(data, 0, 2, {-16, 8, 48, 256});
  c.page_size = paging == 1 ? 16 : paging == 2 ? 32 : paging;
  c.pages = c.page_size == 0
                ? pick<std::int64_t>(data, 0, 0, {1})
                : pick<std::int64_t>(data, 1, 8, {0, -1, INT32_MAX + std::int64_t{1}, kHuge});
  return c;
}

// Index values: mostly in range for `extent`, sometimes just outside or far off.
std::vector<std::int32_t> pick_indices(FuzzedDataProvider& data, std::int64_t n,
                                       std::int64_t extent) {
  std::vector<std::int32_t> values;
  const auto top = static_cast<std::int32_t>(sane(extent, 1, 64) - 1);
  for (std::int64_t i = 0; i < sane(n, 0, 8); ++i) {
    values.push_back(pick<std::int32_t>(data, 0, top, {-1, top + 1, INT32_MAX, INT32_MIN}));
  }
  return values;
}

// Views of a cache with configuration `c` (the shapes of a sane configuration when c is not):
// storage in role `role`, and for a paged cache a block table, an input.
KvCacheView add_cache(FuzzedDataProvider& data, Operands& ops, const KvCacheConfig& c, Role role) {
  const std::int64_t slots = sane(c.slots, 1, 3), heads = sane(c.n_kv_heads, 1, 2),
                     capacity = sane(c.capacity, 1, 40);
  const int dim = static_cast<int>(sane(c.head_dim, 256, 512));
  const bool paged = c.page_size != 0;
  const std::int64_t page_size = sane(c.page_size, 16, 32);
  const std::int64_t blocks = paged ? sane(c.pages, 1, 8) : slots;
  const std::int64_t block_rows = paged ? page_size : capacity;
  KvCacheView view;
  view.config = c;
  const auto add_side = [&](RowFormat format, TensorView& rows, TensorView& norms) {
    if (format == RowFormat::f16) {
      rows = ops.add(role, DType::f16, {blocks, heads, block_rows, dim});
      // F16 rows have no norms; now and then the caller passes some anyway.
      if (data.ConsumeIntegralInRange(0, 15) == 15) {
        norms = ops.add(role, DType::f32, {blocks, heads, block_rows, 1});
      }
    } else {
      rows = ops.add(role, DType::u8, {blocks, heads, block_rows, row_bytes(format, dim)});
      norms = ops.add(role, DType::f32, {blocks, heads, block_rows, row_scales(format, dim)});
    }
  };
  add_side(c.k_format, view.k, view.k_norms);
  add_side(c.v_format, view.v, view.v_norms);
  // A contiguous cache takes no block table; now and then the caller passes one anyway.
  if (paged || data.ConsumeIntegralInRange(0, 15) == 15) {
    const std::int64_t per_slot = (capacity + page_size - 1) / page_size;
    view.block_table = ops.add(Role::input, DType::i32, {slots, per_slot}, /*optional=*/true);
    Operands::fill_i32(view.block_table, pick_indices(data, slots * per_slot, blocks));
  }
  return view;
}

// Now and then makes every run of `query_tokens` rows one slot's consecutive positions, as
// run_decode requires (SPEC §2.8); random indices rarely are.
void maybe_make_runs(FuzzedDataProvider& data, int query_tokens, std::vector<std::int32_t>& slots,
                     std::vector<std::int32_t>& positions) {
  if (query_tokens < 2 || !data.ConsumeBool()) return;
  for (std::size_t i = 0; i < slots.size() && i < positions.size(); ++i) {
    if (i % static_cast<std::size_t>(query_tokens) == 0) continue;
    slots[i] = slots[i - 1];
    if (positions[i - 1] < INT32_MAX) positions[i] = positions[i - 1] + 1;
  }
}

}  // namespace

void fuzz_cache_call(FuzzedDataProvider& data) {
  const KvCacheConfig c = pick_config(data);
  const std::int64_t tokens = pick<std::int64_t>(data, 0, 4, {-1});
  const std::int64_t heads = sane(c.n_kv_heads, 1, 2);
  const std::int64_t dim = sane(c.head_dim, 256, 512);
  Operands ops(data);
  const KvCacheView cache = add_cache(data, ops, c, Role::output);
  const auto dtype = static_cast<DType>(data.ConsumeIntegralInRange(0, 2));
  const TensorView k = ops.add(Role::input, dtype, {tokens, heads, dim});
  const TensorView v = ops.add(Role::input, dtype, {tokens, heads, dim});
  const TensorView slot_ids = ops.add(Role::input, DType::i32, {tokens});
  const TensorView positions = ops.add(Role::input, DType::i32, {tokens});
  Operands::fill_i32(slot_ids, pick_indices(data, tokens, c.slots));
  Operands::fill_i32(positions, pick_indices(data, tokens, c.capacity + 4));
  if (!ops.too_large()) ops.run([&] { append_kv(cache, k, v, slot_ids, positions); });
}

void fuzz_decode_call(FuzzedDataProvider& data) {
  const KvCacheConfig c = pick_config(data);
  DecodeOptions options;
  options.n_heads = static_cast<int>(sane(c.n_kv_heads, 1, 2)) * pick(data, 1, 2, {0, -1, 3});
  options.mask = static_cast<MaskKind>(pick(data, 0, 2, {3, 255}));
  options.sliding_window = pick<std::int64_t>(data, 0, 44, {-1, kHuge});
  options.scale = pick_float(data, {0.0f, 1.0f, 0.0625f});
  options.softcap = pick_float(data, {0.0f, 50.0f, 1.0f});
  options.rotated_output = data.ConsumeBool();
  options.query_tokens = pick(data, 1, 3, {0, -1, kMaxQueryTokens + 1});
  // Automatic chunks, or chunks of 32 or 64 positions; now and then a size no plan takes.
  const std::int64_t chunks = pick<std::int64_t>(data, 0, 2, {-1, 33, kHuge});
  options.fixed_chunk_positions = chunks >= 0 && chunks <= 2 ? 32 * chunks : chunks;
  const std::int64_t max_queries = pick<std::int64_t>(data, 1, 6, {0, -1, kHuge});
  DecodePlan plan;
  try {
    plan = plan_decode(c, options, max_queries);
  } catch (const Error&) {
    return;  // plan_decode writes nothing; its rejections are the decode tests' subject
  }
  const std::int64_t n = pick<std::int64_t>(data, 0, 6, {-1, 7});
  const std::int64_t q_heads = sane(options.n_heads, 1, 4);
  const std::int64_t dim = sane(c.head_dim, 256, 512);
  Operands ops(data);
  const KvCacheView cache = add_cache(data, ops, c, Role::input);
  const TensorView q = ops.add(Role::input, DType::f32, {n, q_heads, dim});
  const TensorView slot_ids = ops.add(Role::input, DType::i32, {n});
  const TensorView seq_pos = ops.add(Role::input, DType::i32, {n});
  const TensorView out = ops.add(Role::output, DType::f32, {n, q_heads, dim});
  const TensorView lse = ops.add(Role::output, DType::f32, {n, q_heads}, /*optional=*/true);
  const TensorView workspace =
      ops.add(Role::output, DType::u8, {sane(plan.workspace_bytes, 0, std::int64_t{1} << 20)});
  std::vector<std::int32_t> slots = pick_indices(data, n, c.slots);
  std::vector<std::int32_t> positions = pick_indices(data, n, c.capacity + 4);
  maybe_make_runs(data, options.query_tokens, slots, positions);
  Operands::fill_i32(slot_ids, slots);
  Operands::fill_i32(seq_pos, positions);
  if (!ops.too_large()) {
    ops.run([&] { run_decode(plan, cache, q, slot_ids, seq_pos, out, lse, workspace); });
  }
}

}  // namespace turbodecode::fuzz
