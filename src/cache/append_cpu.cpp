#include "cache/append_cpu.h"

#include <cstdint>

#include "cache/row_location.h"
#include "common/f16.h"
#include "common/thread_pool.h"
#include "tq/codec_cpu.h"

namespace turbodecode::cache {

namespace {

// (token, head) rows per parallel_for chunk.
constexpr std::int64_t kRowGrain = 8;
constexpr int kMaxHeadDim = 512;

template <class T>
T* element(const TensorView& t, std::int64_t i0, std::int64_t i1, std::int64_t i2) {
  return static_cast<T*>(t.data) + i0 * t.strides[0] + i1 * t.strides[1] + i2 * t.strides[2];
}

const void* input_row(const TensorView& x, std::int64_t token, std::int64_t head) {
  return static_cast<const char*>(x.data) + (token * x.strides[0] + head * x.strides[1]) *
                                                static_cast<std::int64_t>(dtype_bytes(x.dtype));
}

// Writes one input row into one cache row of `rows` (and `norms` for quantized formats).
void store_row(const KvCacheConfig& config, RowFormat format, const TensorView& x,
               std::int64_t token, std::int64_t head, const TensorView& rows,
               const TensorView& norms, const RowLocation& at) {
  const void* source = input_row(x, token, head);
  if (format == RowFormat::f16) {
    float values[kMaxHeadDim];
    tq::load_row(source, x.dtype, config.head_dim, values);
    auto* destination = element<std::uint16_t>(rows, at.block, head, at.row);
    for (int j = 0; j < config.head_dim; ++j) destination[j] = f32_to_f16(values[j]);
    return;
  }
  const CodecParams params{config.head_dim, format, config.scale_factor_d512};
  tq::encode_row(params, source, x.dtype, element<std::uint8_t>(rows, at.block, head, at.row),
                 element<float>(norms, at.block, head, at.row));
}

}  // namespace

void append_kv_cpu(const KvCacheView& cache, const TensorView& k, const TensorView& v,
                   const TensorView& slot_ids, const TensorView& positions) {
  const KvCacheConfig& config = cache.config;
  const RowAddressing addressing = row_addressing(cache);
  const std::int64_t heads = config.n_kv_heads;
  parallel_for(k.shape[0] * heads, kRowGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t token = item / heads;
      const std::int64_t head = item % heads;
      const RowLocation at =
          addressing.locate(slot_ids.as<const std::int32_t>()[token * slot_ids.strides[0]],
                            positions.as<const std::int32_t>()[token * positions.strides[0]]);
      store_row(config, config.k_format, k, token, head, cache.k, cache.k_norms, at);
      store_row(config, config.v_format, v, token, head, cache.v, cache.v_norms, at);
    }
  });
}

}  // namespace turbodecode::cache
