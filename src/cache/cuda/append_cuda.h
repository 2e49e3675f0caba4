// CUDA backend of append_kv: one launch for the whole batch of tokens and all KV heads.
// Arguments arrive validated (index values included) by the public call.
#pragma once

#include "turbodecode/kv_cache.h"

namespace turbodecode::cuda {

void append_kv(const KvCacheView& cache, const TensorView& k, const TensorView& v,
               const TensorView& slot_ids, const TensorView& positions, Stream stream);

}  // namespace turbodecode::cuda
