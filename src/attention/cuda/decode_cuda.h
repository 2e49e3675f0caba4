// CUDA backend of run_decode. Arguments arrive validated by the public call; index values
// (slot ids, positions) are validated on the host unless the stream is being captured, in
// which case the kernels guard them (rows naming bad indices are written as NaN).
#pragma once

#include "turbodecode/attention.h"

namespace turbodecode::cuda {

void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                const TensorView& workspace, Stream stream);

}  // namespace turbodecode::cuda
