// CPU backend of append_kv. Arguments arrive validated (index values included).
#pragma once

#include "turbodecode/kv_cache.h"

namespace turbodecode::cache {

void append_kv_cpu(const KvCacheView& cache, const TensorView& k, const TensorView& v,
                   const TensorView& slot_ids, const TensorView& positions);

}  // namespace turbodecode::cache
