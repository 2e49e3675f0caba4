// Cache configuration rules, sizes and the owning KvCache (SPEC §1.3, §1.7).
#include "turbodecode/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "cache/row_location.h"
#include "common/validate.h"

namespace turbodecode {

namespace {

// Each part of a cache's storage starts on this boundary (wide vector loads on both backends).
constexpr std::int64_t kPartAlignmentBytes = 256;

bool is_known_format(RowFormat format) {
  return format_bits(format) != 0;
}

std::int64_t norm_bytes(RowFormat format, int head_dim) {
  return row_scales(format, head_dim) * std::int64_t{sizeof(float)};
}

std::int64_t align_up(std::int64_t bytes) {
  return (bytes + kPartAlignmentBytes - 1) / kPartAlignmentBytes * kPartAlignmentBytes;
}

// Far beyond any device; keeps every size computed from a configuration within int64.
constexpr std::int64_t kMaxStorageBytes = std::int64_t{1} << 48;

std::int64_t position_bytes(const KvCacheConfig& c) {
  return row_bytes(c.k_format, c.head_dim) + norm_bytes(c.k_format, c.head_dim) +
         row_bytes(c.v_format, c.head_dim) + norm_bytes(c.v_format, c.head_dim);
}

// Byte offsets of the four parts of a cache's storage, and its total size.
struct StorageLayout {
  std::int64_t k = 0, k_norms = 0, v = 0, v_norms = 0, total = 0;
};

StorageLayout layout_of(const KvCacheConfig& c) {
  const cache::StorageGrid grid = cache::storage_grid(c);
  const std::int64_t rows = grid.blocks * grid.heads * grid.block_rows;
  StorageLayout layout;
  std::int64_t offset = 0;
  auto place = [&](std::int64_t bytes) {
    const std::int64_t at = offset;
    offset = align_up(offset + bytes);
    return at;
  };
  layout.k = place(rows * row_bytes(c.k_format, c.head_dim));
  layout.k_norms = place(rows * norm_bytes(c.k_format, c.head_dim));
  layout.v = place(rows * row_bytes(c.v_format, c.head_dim));
  layout.v_norms = place(rows * norm_bytes(c.v_format, c.head_dim));
  layout.total = offset;
  return layout;
}

TensorView rows_view(const Buffer& storage, const KvCacheConfig& c, RowFormat format,
                     std::int64_t offset) {
  const cache::StorageGrid g = cache::storage_grid(c);
  if (format == RowFormat::f16) {
    return storage.view(DType::f16, {g.blocks, g.heads, g.block_rows, c.head_dim}, offset);
  }
  return storage.view(DType::u8, {g.blocks, g.heads, g.block_rows, row_bytes(format, c.head_dim)},
                      offset);
}

TensorView norms_view(const Buffer& storage, const KvCacheConfig& c, RowFormat format,
                      std::int64_t offset) {
  if (!is_quantized(format)) return {};
  const cache::StorageGrid g = cache::storage_grid(c);
  return storage.view(DType::f32, {g.blocks, g.heads, g.block_rows, row_scales(format, c.head_dim)},
                      offset);
}

void validate_paging(const KvCacheConfig& config) {
  if (config.page_size == 0) {
    check_arg(config.pages == 0, "pages", "must be 0 for a contiguous cache (page_size 0)");
    return;
  }
  check_arg(
      std::find(std::begin(kPageSizes), std::end(kPageSizes), config.page_size) !=
          std::end(kPageSizes),
      "page_size",
      "must be 0 (contiguous) or one of 16, 32, 64, 128, not " + std::to_string(config.page_size));
  check_arg(config.pages >= 1, "pages", "must be at least 1 for a paged cache");
  // Block table entries are i32.
  check_arg(config.pages <= INT32_MAX, "pages", "must fit in a 32-bit block table entry");
}

// The storage is bounded before anything is sized from it; the blame goes to the field that
// multiplies it last (capacity for a contiguous cache, pages for a paged one).
void check_storage_bytes(const KvCacheConfig& config) {
  const cache::StorageGrid g = cache::storage_grid(config);
  const bool paged = config.page_size > 0;
  check_arg(
      product_at_most({g.blocks, g.heads, g.block_rows, position_bytes(config)}, kMaxStorageBytes),
      paged ? "pages" : "capacity",
      std::string(paged ? "pages x n_kv_heads x page_size" : "slots x n_kv_heads x capacity") +
          " x bytes per position must be at most 2^48");
}

}  // namespace

void validate_config(const KvCacheConfig& config) {
  check_arg(config.slots >= 1, "slots", "must be at least 1");
  check_arg(config.n_kv_heads >= 1, "n_kv_heads", "must be at least 1");
  check_arg(config.capacity >= 1, "capacity", "must be at least 1");
  check_arg(config.head_dim == 256 || config.head_dim == 512, "head_dim",
            "must be 256 or 512, not " + std::to_string(config.head_dim));
  check_arg(config.kind == LayerKind::linear || config.kind == LayerKind::ring, "kind",
            "must be linear or ring");
  check_arg(is_known_format(config.k_format), "k_format", "is not a known row format");
  check_arg(is_known_format(config.v_format), "v_format", "is not a known row format");
  check_arg(std::isfinite(config.scale_factor_d512) && config.scale_factor_d512 > 0.0f,
            "scale_factor_d512", "must be finite and positive");
  // Positions and slot ids are i32, so a cache can never use rows or slots beyond that range.
  check_arg(config.capacity <= INT32_MAX, "capacity", "must fit in a 32-bit position");
  check_arg(config.slots <= INT32_MAX, "slots", "must fit in a 32-bit slot id");
  validate_paging(config);
  check_storage_bytes(config);
  check_backend(config.device);
}

std::int64_t pages_per_slot(const KvCacheConfig& config) {
  return config.page_size > 0 ? (config.capacity + config.page_size - 1) / config.page_size : 0;
}

std::int64_t bytes_per_position(const KvCacheConfig& config) {
  validate_config(config);
  return position_bytes(config);
}

KvCache::KvCache(const KvCacheConfig& config) {
  validate_config(config);
  const StorageLayout layout = layout_of(config);
  storage_ = Buffer(config.device, layout.total);
  storage_.fill_bytes(0);
  view_.config = config;
  view_.k = rows_view(storage_, config, config.k_format, layout.k);
  view_.k_norms = norms_view(storage_, config, config.k_format, layout.k_norms);
  view_.v = rows_view(storage_, config, config.v_format, layout.v);
  view_.v_norms = norms_view(storage_, config, config.v_format, layout.v_norms);
}

KvCacheView KvCache::view(const TensorView& block_table) const {
  KvCacheView paged = view_;
  paged.block_table = block_table;
  return paged;
}

}  // namespace turbodecode
