// Host tensors of one CPU run_decode call, shared by the CPU attention tests: q (random), out
// and lse (NaN-poisoned), index arrays and workspace, and random cache contents.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "attention_cases.h"
#include "common/f16.h"
#include "test_support.h"
#include "turbodecode/attention.h"
#include "turbodecode/buffer.h"

namespace turbodecode::testing {

// Fills every row of a CPU cache with random contents: F16 rows ~ N(0, 1), quantized rows as
// fill_random_cache draws them. Fast enough for caches of tens of MB: values come from a table
// of Gaussians picked by a cheap generator.
inline void fill_random(const KvCacheView& cache, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint16_t> gaussians(4096);
  std::normal_distribution<float> normal;
  for (auto& g : gaussians) g = f32_to_f16(normal(rng));
  fill_random_cache(cache, rng, [&] { return gaussians[rng() & 4095]; });
}

struct DecodeCall {
  DecodeCall(const DecodePlan& plan, const std::vector<std::int32_t>& slots,
             const std::vector<std::int32_t>& positions, std::uint64_t seed,
             std::int64_t row_padding = 0)
      : n(static_cast<std::int64_t>(slots.size())),
        heads(plan.options.n_heads),
        dim(plan.cache.head_dim),
        padded_dim(dim + row_padding),
        q_values(gaussian(static_cast<std::size_t>(n * heads * dim), seed)),
        q_buffer(Device::cpu, n * heads * padded_dim * 4),
        out_buffer(Device::cpu, n * heads * padded_dim * 4),
        lse_buffer(Device::cpu, n * heads * 4),
        slot_buffer(to_device(Device::cpu, slots)),
        pos_buffer(to_device(Device::cpu, positions)),
        workspace_buffer(Device::cpu, std::max<std::int64_t>(plan.workspace_bytes, 1)) {
    q_buffer.fill_bytes(0xFF);
    for (std::int64_t r = 0; r < n * heads; ++r) {
      std::memcpy(q_buffer.view(DType::f32, {n * heads, padded_dim}).as<float>() + r * padded_dim,
                  q_values.data() + r * dim, static_cast<std::size_t>(dim) * 4);
    }
    out_buffer.fill_bytes(0xFF);
    lse_buffer.fill_bytes(0xFF);
  }

  TensorView rows(const Buffer& buffer) const {
    TensorView view = buffer.view(DType::f32, {n, heads, dim});
    view.strides = {heads * padded_dim, padded_dim, 1, 0};
    return view;
  }
  TensorView q() const { return rows(q_buffer); }
  TensorView out() const { return rows(out_buffer); }
  TensorView lse() const { return lse_buffer.view(DType::f32, {n, heads}); }
  TensorView slot_ids() const { return slot_buffer.view(DType::i32, {n}); }
  TensorView seq_pos() const { return pos_buffer.view(DType::i32, {n}); }
  TensorView workspace() const {
    return workspace_buffer.view(DType::u8, {workspace_buffer.bytes()});
  }

  // Replaces q row `i` (all heads) by `values`.
  void set_query(std::int64_t i, const float* values) {
    std::copy_n(values, heads * dim, q_values.begin() + i * heads * dim);
    for (std::int64_t h = 0; h < heads; ++h) {
      std::memcpy(q().as<float>() + (i * heads + h) * padded_dim, values + h * dim,
                  static_cast<std::size_t>(dim) * 4);
    }
  }

  void run(const DecodePlan& plan, const KvCacheView& cache) const {
    run_decode(plan, cache, q(), slot_ids(), seq_pos(), out(), workspace());
  }
  void run_with_lse(const DecodePlan& plan, const KvCacheView& cache) const {
    run_decode(plan, cache, q(), slot_ids(), seq_pos(), out(), lse(), workspace());
  }
  // Output of query i (all heads, contiguous).
  std::vector<float> output(std::int64_t i) const {
    std::vector<float> values(static_cast<std::size_t>(heads * dim));
    const float* base = out().as<float>();
    for (std::int64_t h = 0; h < heads; ++h) {
      std::memcpy(values.data() + h * dim, base + (i * heads + h) * padded_dim,
                  static_cast<std::size_t>(dim) * 4);
    }
    return values;
  }
  std::vector<float> lse_values(std::int64_t i) const {
    const float* base = lse().as<float>() + i * heads;
    return {base, base + heads};
  }
  bool out_untouched() const {
    for (const Buffer* buffer : {&out_buffer, &lse_buffer}) {
      const auto* bytes = static_cast<const std::uint8_t*>(buffer->data());
      if (!std::all_of(bytes, bytes + buffer->bytes(), [](std::uint8_t b) { return b == 0xFF; })) {
        return false;
      }
    }
    return true;
  }

  std::int64_t n, heads, dim, padded_dim;
  std::vector<float> q_values;
  Buffer q_buffer, out_buffer, lse_buffer, slot_buffer, pos_buffer, workspace_buffer;
};

}  // namespace turbodecode::testing
