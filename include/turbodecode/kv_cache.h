// The KV cache of one layer (SPEC §1.3): slots × KV heads × capacity rows, K as F16 or TQ
// codes, V as TQ codes or F16, linear or ring addressing.
#pragma once

#include <cstdint>

#include "turbodecode/buffer.h"
#include "turbodecode/tensor.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode {

// linear: position p lives in row p (p >= capacity is an error).
// ring:   position p lives in row p mod capacity (sliding-window layers).
enum class LayerKind : std::uint8_t { linear, ring };

struct KvCacheConfig {
  std::int64_t slots = 1;
  int n_kv_heads = 1;
  std::int64_t capacity = 0;
  int head_dim = 256;
  LayerKind kind = LayerKind::linear;
  RowFormat k_format = RowFormat::f16;
  RowFormat v_format = RowFormat::tq8;
  float scale_factor_d512 = 1.0f;
  Device device = Device::cpu;
};

// Throws InvalidArgument naming the first field that breaks a rule. Limits: slots and
// capacity below 2^31 (slot ids and positions are i32), the whole storage at most 2^48 bytes.
void validate_config(const KvCacheConfig& config);
// Bytes one position of one KV head occupies (K + V + norms).
std::int64_t bytes_per_position(const KvCacheConfig& config);

// Views of a cache's storage. Shapes: k/v [slots, n_kv_heads, capacity, row_bytes] u8 for TQ
// or [slots, n_kv_heads, capacity, D] f16; k_norms/v_norms [slots, n_kv_heads, capacity,
// norms_per_row] f32, absent for F16 rows.
struct KvCacheView {
  KvCacheConfig config;
  TensorView k, k_norms, v, v_norms;
};

// A cache whose storage the library owns (zero-filled on creation).
class KvCache {
 public:
  explicit KvCache(const KvCacheConfig& config);
  const KvCacheConfig& config() const { return view_.config; }
  const KvCacheView& view() const { return view_; }
  std::int64_t bytes() const { return storage_.bytes(); }

 private:
  Buffer storage_;
  KvCacheView view_;
};

// Quantize-on-write append of n tokens (SPEC §1.3): for each i, writes K (converted to F16,
// or encoded) and V (encoded, or F16) of every KV head at row(positions[i]) of slot
// slot_ids[i]. k, v: [n, n_kv_heads, D] f32/f16/bf16; slot_ids, positions: [n] i32. All on
// the cache's device. Touches only the named rows. Rejects a position a linear cache cannot
// hold, an unknown slot, and two tokens naming the same row (index arrays are read on the
// host to check them; on CUDA that synchronises the stream).
// Graph mode: while `stream` is being captured into a CUDA graph the index arrays are not
// read (their values at replay are what counts), so the call can be captured once and
// replayed with new slot_ids and positions. Shapes, formats and pointers are still checked.
// At replay the kernel guards every index: a token whose slot is unknown, whose position is
// negative, or whose position a linear cache cannot hold writes nothing. Two tokens naming the
// same row are then the caller's to avoid: that row's contents are unspecified.
void append_kv(const KvCacheView& cache, const TensorView& k, const TensorView& v,
               const TensorView& slot_ids, const TensorView& positions, Stream stream = {});

}  // namespace turbodecode
