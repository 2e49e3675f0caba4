#include "cache/cache_view_check.h"

#include <string_view>

#include "cache/row_location.h"
#include "common/validate.h"

namespace turbodecode::cache {
namespace {

// One stored side of the cache (K or V).
void check_side(const KvCacheConfig& c, RowFormat format, const TensorView& rows,
                const TensorView& norms, std::string_view rows_name, std::string_view norms_name) {
  const StorageGrid g = storage_grid(c);
  if (format == RowFormat::f16) {
    check_rows(rows, rows_name, c.device, DType::f16,
               {g.blocks, g.heads, g.block_rows, c.head_dim});
    check_arg(!norms.present(), norms_name, "must be absent for f16 rows");
    return;
  }
  check_rows(rows, rows_name, c.device, DType::u8,
             {g.blocks, g.heads, g.block_rows, row_bytes(format, c.head_dim)});
  check_rows(norms, norms_name, c.device, DType::f32,
             {g.blocks, g.heads, g.block_rows, row_scales(format, c.head_dim)});
}

}  // namespace

void check_cache_view(const KvCacheView& cache) {
  const KvCacheConfig& c = cache.config;
  check_side(c, c.k_format, cache.k, cache.k_norms, "cache.k", "cache.k_norms");
  check_side(c, c.v_format, cache.v, cache.v_norms, "cache.v", "cache.v_norms");
  if (c.page_size == 0) {
    check_arg(!cache.block_table.present(), "cache.block_table",
              "must be absent for a contiguous cache (page_size 0)");
    return;
  }
  check_arg(cache.block_table.present(), "cache.block_table",
            "a paged cache needs one: KvCache::view(block_table)");
  check_rows(cache.block_table, "cache.block_table", c.device, DType::i32,
             {c.slots, pages_per_slot(c)});
}

}  // namespace turbodecode::cache
