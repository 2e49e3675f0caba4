// One side (K or V) of a cache's storage as the CPU backend reads it: the address of a row
// (located by cache/row_location.h, contiguous or paged) and how to turn it into f32 values.
#pragma once

#include <cstdint>

#include "cache/row_location.h"
#include "tq/codec_math.h"
#include "tq/tables.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::attention {

// The FP8 reader (row_readers-inl.h) yields E4M3 values / 256; the row's scale times 256 makes
// up for it. Both factors are powers of two and the scale a finite f32 ≤ f32 max / 448, so
// (scale · 256) · (e / 256) rounds as scale · e does.
inline constexpr float kFp8ReaderScale = 256.0f;

// One side (K or V) of the cache. A TQ row decodes to codebook values times one scale per part
// (the whole row at D = 256, each half at D = 512); an FP8 row to E4M3 values times its one
// scale; an F16 row is one part with scale 1.
class CacheRows {
 public:
  CacheRows(const KvCacheConfig& config, RowFormat format, const TensorView& rows,
            const TensorView& norms)
      : format_(format),
        head_dim_(config.head_dim),
        parts_(is_turboquant(format) ? norms_per_row(config.head_dim) : 1),
        scale_factor_d512_(config.scale_factor_d512),
        element_bytes_(format == RowFormat::f16 ? 2 : 1),
        rows_(static_cast<const std::uint8_t*>(rows.data)),
        norms_(static_cast<const float*>(norms.data)),
        row_bytes_(rows.strides[2] * element_bytes_),
        row_content_bytes_(rows.shape[3] * element_bytes_),
        rows_strides_{rows.strides[0], rows.strides[1]},
        norms_strides_{norms.strides[0], norms.strides[1], norms.strides[2]},
        codebook_(is_turboquant(format) ? tq::codebook(format_bits(format)).data() : nullptr) {}

  int parts() const { return parts_; }
  int part_length() const { return head_dim_ / parts_; }

  const std::uint8_t* address(cache::RowLocation at, int head) const {
    return rows_ + (at.block * rows_strides_[0] + head * rows_strides_[1]) * element_bytes_ +
           at.row * row_bytes_;
  }

  // Asks for a row's cache lines ahead of use: the hardware prefetchers stop at every 4 KiB
  // page, which a chunk crosses every few rows (and a paged cache at every page).
  void prefetch(cache::RowLocation at, int head) const {
    const std::uint8_t* data = address(at, head);
    for (std::int64_t line = 0; line < row_content_bytes_; line += 64) {
      __builtin_prefetch(data + line);
    }
  }

  // scales[b]: the factor of part b's values (1 for F16 rows).
  void part_scales(cache::RowLocation at, int head, float* scales) const {
    scales[0] = scales[1] = 1.0f;
    if (format_ == RowFormat::f16) return;
    const float* norm = norms_ + at.block * norms_strides_[0] + head * norms_strides_[1] +
                        at.row * norms_strides_[2];
    if (format_ == RowFormat::fp8) {
      scales[0] = norm[0] * kFp8ReaderScale;
    } else if (parts_ == 1) {
      scales[0] = tq::d256_decode_scale(norm[0]);
    } else {
      scales[0] = tq::d512_decode_scale(norm[0], scale_factor_d512_);
      scales[1] = tq::d512_decode_scale(norm[1], scale_factor_d512_);
    }
  }

  RowFormat format() const { return format_; }
  const float* codebook() const { return codebook_; }

 private:
  RowFormat format_;
  int head_dim_;
  int parts_;
  float scale_factor_d512_;
  std::int64_t element_bytes_;
  const std::uint8_t* rows_;
  const float* norms_;
  std::int64_t row_bytes_;          // bytes between consecutive rows of a block
  std::int64_t row_content_bytes_;  // bytes of one row (the stride may be larger)
  std::int64_t rows_strides_[2];
  std::int64_t norms_strides_[3];
  const float* codebook_;
};

}  // namespace turbodecode::attention
