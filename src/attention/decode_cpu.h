// CPU backend of run_decode. Arguments arrive validated by the public call.
#pragma once

#include "turbodecode/attention.h"

namespace turbodecode::attention {

void run_decode_cpu(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                    const TensorView& slot_ids, const TensorView& seq_pos, const DecodeShard& shard,
                    const TensorView& out, const TensorView& lse, const TensorView& workspace);

}  // namespace turbodecode::attention
