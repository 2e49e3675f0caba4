#include "cache/cache_view_check.h"

#include <string_view>

#include "common/validate.h"

namespace turbodecode::cache {
namespace {

// One stored side of the cache (K or V).
void check_side(const KvCacheConfig& c, RowFormat format, const TensorView& rows,
                const TensorView& norms, std::string_view rows_name, std::string_view norms_name) {
  if (format == RowFormat::f16) {
    check_rows(rows, rows_name, c.device, DType::f16,
               {c.slots, c.n_kv_heads, c.capacity, c.head_dim});
    check_arg(!norms.present(), norms_name, "must be absent for f16 rows");
    return;
  }
  check_rows(rows, rows_name, c.device, DType::u8,
             {c.slots, c.n_kv_heads, c.capacity, row_bytes(format, c.head_dim)});
  check_rows(norms, norms_name, c.device, DType::f32,
             {c.slots, c.n_kv_heads, c.capacity, norms_per_row(c.head_dim)});
}

}  // namespace

void check_cache_view(const KvCacheView& cache) {
  const KvCacheConfig& c = cache.config;
  check_side(c, c.k_format, cache.k, cache.k_norms, "cache.k", "cache.k_norms");
  check_side(c, c.v_format, cache.v, cache.v_norms, "cache.v", "cache.v_norms");
}

}  // namespace turbodecode::cache
