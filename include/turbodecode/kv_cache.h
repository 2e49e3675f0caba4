// The KV cache of one layer (SPEC §1.3, §1.7): slots × KV heads × capacity positions, K and V
// rows in any RowFormat, linear or ring addressing, stored contiguously per slot or in pages
// named by a block table.
#pragma once

#include <cstdint>

#include "turbodecode/buffer.h"
#include "turbodecode/tensor.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode {

// linear: position p lives in logical row p (p >= capacity is an error).
// ring:   position p lives in logical row p mod capacity (sliding-window layers).
enum class LayerKind : std::uint8_t { linear, ring };

// Page sizes a paged cache accepts (rows per page).
inline constexpr int kPageSizes[] = {16, 32, 64, 128};

struct KvCacheConfig {
  std::int64_t slots = 1;
  int n_kv_heads = 1;
  std::int64_t capacity = 0;  // logical rows per slot
  int head_dim = 256;
  LayerKind kind = LayerKind::linear;
  RowFormat k_format = RowFormat::f16;
  RowFormat v_format = RowFormat::tq8;
  float scale_factor_d512 = 1.0f;
  Device device = Device::cpu;
  // 0: each slot's rows are one contiguous region. Else a paged cache (SPEC §1.7): rows live
  // in `pages` physical pages of `page_size` rows (one of kPageSizes), and a block table maps
  // each slot's logical rows j·P … j·P + P − 1 to a page.
  int page_size = 0;
  std::int64_t pages = 0;
};

// Throws InvalidArgument naming the first field that breaks a rule. Limits: slots, capacity and
// pages below 2^31 (slot ids, positions and block table entries are i32), the whole storage at
// most 2^48 bytes.
void validate_config(const KvCacheConfig& config);
// Bytes one position of one KV head occupies (K + V + norms or scales).
std::int64_t bytes_per_position(const KvCacheConfig& config);
// Entries of a block table row: ceil(capacity / page_size) for a paged cache, 0 otherwise.
std::int64_t pages_per_slot(const KvCacheConfig& config);

// Views of a cache's storage. Contiguous: k/v [slots, n_kv_heads, capacity, row] and
// k_norms/v_norms [slots, n_kv_heads, capacity, row_scales]. Paged: the same with
// [pages, n_kv_heads, page_size, ...], and block_table i32 [slots, pages_per_slot] on the
// cache's device: block_table[s][j] is the page holding logical rows j·P … j·P + P − 1 of
// slot s. Rows are u8 [.., row_bytes] for quantized formats, f16 [.., D] for f16; the side
// values (norms, scales) are absent for f16 rows. Pages may be shared between slots (prefix
// sharing); the table is read on the device, so graphs replay as it changes.
struct KvCacheView {
  KvCacheConfig config;
  TensorView k, k_norms, v, v_norms;
  TensorView block_table;  // paged caches only
};

// A cache whose storage the library owns (zero-filled on creation). A paged cache's block
// table belongs to the caller: view(block_table) pairs it with the storage.
class KvCache {
 public:
  explicit KvCache(const KvCacheConfig& config);
  const KvCacheConfig& config() const { return view_.config; }
  const KvCacheView& view() const { return view_; }
  KvCacheView view(const TensorView& block_table) const;
  std::int64_t bytes() const { return storage_.bytes(); }

 private:
  Buffer storage_;
  KvCacheView view_;
};

// Quantize-on-write append of n tokens (SPEC §1.3): for each i, writes K and V of every KV
// head, converted to the cache's formats, at the row of positions[i] in slot slot_ids[i]
// (through the block table when paged). k, v: [n, n_kv_heads, D] f32/f16/bf16; slot_ids,
// positions: [n] i32. All on the cache's device. Touches only the named rows. Rejects a
// position a linear cache cannot hold, an unknown slot, a block table entry that names no
// page, and two tokens naming the same physical row (index arrays and the block table are
// read on the host to check them; on CUDA that synchronises the stream).
// Graph mode: while `stream` is being captured into a CUDA graph the index arrays are not
// read (their values at replay are what counts), so the call can be captured once and
// replayed with new slot_ids, positions and block tables. Shapes, formats and pointers are
// still checked. At replay the kernel guards every index: a token whose slot is unknown, whose
// position is negative or beyond a linear cache, or whose page is outside [0, pages) writes
// nothing. Two tokens naming the same row are then the caller's to avoid.
void append_kv(const KvCacheView& cache, const TensorView& k, const TensorView& v,
               const TensorView& slot_ids, const TensorView& positions, Stream stream = {});

}  // namespace turbodecode
