// CUDA backend of run_decode. Arguments arrive validated by the public call; index values
// (slot ids, positions) are validated on the host unless the stream is being captured, in
// which case the kernels guard them (rows naming bad indices are written as NaN).
#pragma once

#include <cstdint>

#include "attention/split_policy.h"
#include "turbodecode/attention.h"

namespace turbodecode::cuda {

// The split policy for the current CUDA device (called by plan_decode), chosen from the SM
// count by wave efficiency; fields of `plan` other than the policy and workspace are set.
attention::SplitPolicy choose_split_policy(const DecodePlan& plan);
// Workspace bytes run_decode needs for `plan` on CUDA.
std::int64_t workspace_bytes(const DecodePlan& plan);

void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                const TensorView& workspace, Stream stream);

}  // namespace turbodecode::cuda
