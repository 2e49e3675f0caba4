#include "cache/row_location.h"

#include <bit>

namespace turbodecode::cache {

RowAddressing row_addressing(const KvCacheView& cache) {
  const KvCacheConfig& c = cache.config;
  const bool paged = c.page_size > 0;
  return {c.slots,
          c.capacity,
          c.pages,
          paged ? std::countr_zero(static_cast<unsigned>(c.page_size)) : 0,
          c.kind == LayerKind::ring,
          paged,
          paged ? cache.block_table.as<const std::int32_t>() : nullptr,
          paged ? cache.block_table.strides[0] : 0};
}

StorageGrid storage_grid(const KvCacheConfig& config) {
  if (config.page_size > 0) return {config.pages, config.n_kv_heads, config.page_size};
  return {config.slots, config.n_kv_heads, config.capacity};
}

}  // namespace turbodecode::cache
