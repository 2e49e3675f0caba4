// CPU backend of append_kv. Arguments arrive validated (index values included).
#pragma once

#include "turbodecode/kv_cache.h"

namespace turbodecode::cache {

// Cache row that holds `position` in a layer of this kind (SPEC §1.3).
std::int64_t row_of_position(const KvCacheConfig& config, std::int64_t position);

void append_kv_cpu(const KvCacheView& cache, const TensorView& k, const TensorView& v,
                   const TensorView& slot_ids, const TensorView& positions);

}  // namespace turbodecode::cache
