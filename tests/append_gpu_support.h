// append_kv on the CUDA backend against the CPU backend: caches of both devices over one
// background, token batches, and the comparison of every storage row (SPEC §1.3, §1.7, §5).
// The CPU backend is itself checked against the oracle (append_kv_test).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cache_contents.h"
#include "codec_agreement.h"
#include "common/cuda_runtime.h"
#include "common/f16.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::testing {

inline constexpr int kSlots = 3;
inline constexpr int kKvHeads = 2;
inline constexpr std::int64_t kCapacity = 12;

struct CacheCase {
  int head_dim;
  RowFormat k_format, v_format;
  LayerKind kind;
  DType input;
  int page_size = 0;  // 0: contiguous
};

inline std::string case_label(const CacheCase& c) {
  std::string label = "D";
  label += std::to_string(c.head_dim);
  for (const char* part :
       {" K ", format_name(c.k_format), " V ", format_name(c.v_format),
        c.kind == LayerKind::ring ? " ring " : " linear ", dtype_name(c.input)}) {
    label += part;
  }
  if (c.page_size > 0) label += " pages of " + std::to_string(c.page_size);
  return label;
}

// A contiguous cache of `capacity` rows per slot, or a paged one of capacity·5/2 rows per slot
// (two and a half pages) with two spare pages no table names.
inline KvCacheConfig config_of(const CacheCase& c, Device device,
                               std::int64_t capacity = kCapacity) {
  KvCacheConfig config;
  config.slots = kSlots;
  config.n_kv_heads = kKvHeads;
  config.capacity =
      c.page_size > 0 ? std::max(capacity, c.page_size * std::int64_t{5} / 2) : capacity;
  config.head_dim = c.head_dim;
  config.kind = c.kind;
  config.k_format = c.k_format;
  config.v_format = c.v_format;
  config.device = device;
  config.page_size = c.page_size;
  config.pages = c.page_size > 0 ? kSlots * pages_per_slot(config) + 2 : 0;
  return config;
}

// A cache on one device with its block table (paged caches): the table's host copy is
// `table`, which set_table() uploads after a change.
struct DeviceCache {
  DeviceCache(const KvCacheConfig& config, const BlockTable& host_table)
      : cache(config), table(host_table) {
    if (config.page_size == 0) {
      view = cache.view();
      return;
    }
    table_buffer = to_device(config.device, table.entries);
    TensorView t = table.view();
    t.data = table_buffer.data();
    t.device = config.device;
    view = cache.view(t);
  }
  void set_table(const BlockTable& host_table) {
    table = host_table;
    table_buffer.copy_from_host(table.entries.data(),
                                static_cast<std::int64_t>(table.entries.size() * 4));
  }

  KvCache cache;
  BlockTable table;
  Buffer table_buffer;
  KvCacheView view;
};

// One array of a cache (K rows, K norms, V rows, V norms) and how its rows compare.
enum class PartKind { f16_rows, codes, norms };
struct CachePart {
  TensorView view;
  PartKind kind;
  RowFormat format;
};

inline std::vector<CachePart> cache_parts(const KvCacheView& cache) {
  std::vector<CachePart> parts;
  const auto add = [&](const TensorView& rows, const TensorView& norms, RowFormat format) {
    if (!is_quantized(format)) {
      parts.push_back({rows, PartKind::f16_rows, format});
      return;
    }
    parts.push_back({rows, PartKind::codes, format});
    parts.push_back({norms, PartKind::norms, format});
  };
  add(cache.k, cache.k_norms, cache.config.k_format);
  add(cache.v, cache.v_norms, cache.config.v_format);
  return parts;
}

inline std::vector<std::uint8_t> download(const TensorView& t) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(t.span_bytes()));
  if (t.device == Device::cuda) {
    cuda::copy_to_host(bytes.data(), t.data, t.span_bytes());
  } else {
    std::memcpy(bytes.data(), t.data, bytes.size());
  }
  return bytes;
}

inline void upload(const TensorView& t, const std::vector<std::uint8_t>& bytes) {
  if (t.device == Device::cuda) {
    cuda::copy_to_device(t.data, bytes.data(), static_cast<std::int64_t>(bytes.size()));
  } else {
    std::memcpy(t.data, bytes.data(), bytes.size());
  }
}

// A background for every part: random bytes, or all 0xFF (NaN as f32/f16).
inline std::vector<std::vector<std::uint8_t>> background_of(const KvCacheView& cache, bool poison,
                                                            std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::uint8_t>> background;
  for (const CachePart& part : cache_parts(cache)) {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(part.view.span_bytes()), 0xFF);
    if (!poison) {
      for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    }
    background.push_back(std::move(bytes));
  }
  return background;
}

inline void fill(const KvCacheView& cache,
                 const std::vector<std::vector<std::uint8_t>>& background) {
  const auto parts = cache_parts(cache);
  for (std::size_t p = 0; p < parts.size(); ++p) upload(parts[p].view, background[p]);
}

// A batch of tokens for append_kv on one device: k, v [n, heads, D] (head stride D, or D + 1
// to take the kernels' unaligned path), slot ids and positions.
struct TokenBatch {
  Buffer k, v, slots, positions;
  TensorView k_view, v_view, slots_view, positions_view;
};

inline std::vector<std::uint8_t> token_bytes(std::int64_t tokens, int head_dim, DType dtype,
                                             std::int64_t head_stride, std::uint64_t seed) {
  const auto values =
      gaussian(static_cast<std::size_t>(tokens * kKvHeads * head_stride), seed, 2.0f);
  const auto element = static_cast<std::int64_t>(dtype_bytes(dtype));
  std::vector<std::uint8_t> bytes(values.size() * static_cast<std::size_t>(element));
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint8_t* at = bytes.data() + i * static_cast<std::size_t>(element);
    if (dtype == DType::f32) {
      std::memcpy(at, &values[i], 4);
    } else {
      const std::uint16_t half =
          dtype == DType::f16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
      std::memcpy(at, &half, 2);
    }
  }
  return bytes;
}

// A batch holding given k and v bytes ([n, heads, head_stride] of c.input).
inline TokenBatch batch_of(Device device, const CacheCase& c,
                           const std::vector<std::uint8_t>& k_bytes,
                           const std::vector<std::uint8_t>& v_bytes,
                           const std::vector<std::int32_t>& slots,
                           const std::vector<std::int32_t>& positions, std::int64_t head_stride) {
  const auto n = static_cast<std::int64_t>(slots.size());
  TokenBatch b;
  const auto make_rows = [&](Buffer& buffer, TensorView& view,
                             const std::vector<std::uint8_t>& bytes) {
    buffer = to_device(device, bytes);
    view = TensorView::contiguous(buffer.data(), c.input, {n, kKvHeads, c.head_dim}, device);
    view.strides = {kKvHeads * head_stride, head_stride, 1, 0};
  };
  make_rows(b.k, b.k_view, k_bytes);
  make_rows(b.v, b.v_view, v_bytes);
  b.slots = to_device(device, slots);
  b.positions = to_device(device, positions);
  b.slots_view = TensorView::contiguous(b.slots.data(), DType::i32, {n}, device);
  b.positions_view = TensorView::contiguous(b.positions.data(), DType::i32, {n}, device);
  return b;
}

inline TokenBatch make_batch(Device device, const CacheCase& c,
                             const std::vector<std::int32_t>& slots,
                             const std::vector<std::int32_t>& positions, bool padded,
                             std::uint64_t seed) {
  const auto n = static_cast<std::int64_t>(slots.size());
  const std::int64_t head_stride = c.head_dim + (padded ? 1 : 0);
  return batch_of(device, c, token_bytes(n, c.head_dim, c.input, head_stride, seed),
                  token_bytes(n, c.head_dim, c.input, head_stride, seed + 1), slots, positions,
                  head_stride);
}

// The storage row (block · block_rows + row) that (slot, position) names.
inline std::int64_t storage_row(const KvCacheConfig& c, const BlockTable& table, std::int64_t slot,
                                std::int64_t position) {
  const Placement at = placement(c, table, slot, position);
  const std::int64_t block_rows = c.page_size > 0 ? c.page_size : c.capacity;
  return at.block * block_rows + at.row;
}

// Compares every row of every part: storage rows named in `targets` (storage_row) against the
// CPU backend's, all others against the background.
inline void expect_cache_matches(const KvCacheView& cpu, const KvCacheView& gpu,
                                 const std::vector<std::vector<std::uint8_t>>& background,
                                 const std::set<std::int64_t>& targets) {
  const auto cpu_parts = cache_parts(cpu);
  const auto gpu_parts = cache_parts(gpu);
  for (std::size_t p = 0; p < gpu_parts.size(); ++p) {
    SCOPED_TRACE("cache part " + std::to_string(p));
    const CachePart& part = gpu_parts[p];
    const auto want = download(cpu_parts[p].view);
    const auto got = download(part.view);
    const std::int64_t row_bytes =
        part.view.shape[3] * static_cast<std::int64_t>(dtype_bytes(part.view.dtype));
    const std::int64_t block_rows = part.view.shape[2];
    const std::int64_t rows = static_cast<std::int64_t>(got.size()) / row_bytes;
    CodeAgreement codes;
    std::int64_t other_rows_changed = 0, rows_differing = 0;
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t block = i / (kKvHeads * block_rows);
      const std::int64_t target = block * block_rows + i % block_rows;
      const std::uint8_t* g = got.data() + i * row_bytes;
      const std::uint8_t* w = want.data() + i * row_bytes;
      if (!targets.count(target)) {
        other_rows_changed += std::memcmp(g, background[p].data() + i * row_bytes,
                                          static_cast<std::size_t>(row_bytes)) != 0;
      } else if (part.kind == PartKind::codes) {
        compare_code_row(w, g, row_bytes, part.format, codes);
      } else if (part.kind == PartKind::norms) {
        for (std::int64_t k = 0; k < row_bytes / 4; ++k) {
          float a, b;
          std::memcpy(&a, w + 4 * k, 4);
          std::memcpy(&b, g + 4 * k, 4);
          rows_differing += !norms_agree(a, b);
        }
      } else {
        rows_differing += std::memcmp(g, w, static_cast<std::size_t>(row_bytes)) != 0;
      }
    }
    EXPECT_EQ(other_rows_changed, 0) << "rows outside the appended ones changed";
    EXPECT_EQ(rows_differing, 0) << "appended rows differ from the CPU backend";
    EXPECT_TRUE(codes.within_spec()) << codes.describe();
  }
}

}  // namespace turbodecode::testing
