// The one validation of merge_attention (SPEC §7), shared by the CPU and CUDA backends.
#pragma once

#include "shard/merge_args.h"
#include "turbodecode/tensor.h"

namespace turbodecode::shard {

MergeArgs validate_merge(const TensorView& parts_out, const TensorView& parts_lse,
                         const TensorView& out, const TensorView& lse);

}  // namespace turbodecode::shard
