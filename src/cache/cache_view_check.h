// The check that a KvCacheView's tensors are the ones its configuration describes, shared by
// every operator that takes a cache (append_kv, run_decode).
#pragma once

#include "turbodecode/kv_cache.h"

namespace turbodecode::cache {

// Checks K and V against cache.config: F16 rows [slots, n_kv_heads, capacity, D] with no
// norms, or TurboQuant codes [.., row_bytes] u8 with f32 norms [.., norms_per_row], all on the
// config's device with contiguous rows. Throws InvalidArgument naming the tensor ("cache.k",
// "cache.v_norms", ...). The config itself is the caller's to validate.
void check_cache_view(const KvCacheView& cache);

}  // namespace turbodecode::cache
