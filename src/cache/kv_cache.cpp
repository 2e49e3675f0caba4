// Cache configuration rules, sizes and the owning KvCache (SPEC §1.3).
#include "turbodecode/kv_cache.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "common/validate.h"

namespace turbodecode {

namespace {

// Each part of a cache's storage starts on this boundary (wide vector loads on both backends).
constexpr std::int64_t kPartAlignmentBytes = 256;

bool is_known_format(RowFormat format) {
  return format_bits(format) != 0;
}

std::int64_t norm_bytes(RowFormat format, int head_dim) {
  return is_quantized(format) ? norms_per_row(head_dim) * std::int64_t{sizeof(float)} : 0;
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
  const std::int64_t rows = c.slots * c.n_kv_heads * c.capacity;
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
  if (format == RowFormat::f16) {
    return storage.view(DType::f16, {c.slots, c.n_kv_heads, c.capacity, c.head_dim}, offset);
  }
  return storage.view(DType::u8, {c.slots, c.n_kv_heads, c.capacity, row_bytes(format, c.head_dim)},
                      offset);
}

TensorView norms_view(const Buffer& storage, const KvCacheConfig& c, RowFormat format,
                      std::int64_t offset) {
  if (!is_quantized(format)) return {};
  return storage.view(DType::f32, {c.slots, c.n_kv_heads, c.capacity, norms_per_row(c.head_dim)},
                      offset);
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
  check_arg(
      product_at_most({config.slots, config.n_kv_heads, config.capacity, position_bytes(config)},
                      kMaxStorageBytes),
      "capacity", "slots x n_kv_heads x capacity x bytes per position must be at most 2^48");
  check_backend(config.device);
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

}  // namespace turbodecode
