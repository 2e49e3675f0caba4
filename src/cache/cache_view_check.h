// The check that a KvCacheView's tensors are the ones its configuration describes, shared by
// every operator that takes a cache (append_kv, run_decode).
#pragma once

#include "turbodecode/kv_cache.h"

namespace turbodecode::cache {

// Checks K and V against cache.config: F16 rows [blocks, n_kv_heads, block_rows, D] with no
// norms, or codes [.., row_bytes] u8 with f32 side values [.., row_scales], all on the config's
// device with contiguous rows (blocks × block_rows: slots × capacity, or pages × page_size);
// and the block table: i32 [slots, pages_per_slot] on that device for a paged cache, absent
// for a contiguous one. Throws InvalidArgument naming the tensor ("cache.k", "cache.v_norms",
// "cache.block_table", ...). The config itself is the caller's to validate, and so are the
// table's values.
void check_cache_view(const KvCacheView& cache);

}  // namespace turbodecode::cache
