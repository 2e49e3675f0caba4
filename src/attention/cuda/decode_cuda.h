// CUDA backend of plan_decode and run_decode. Arguments arrive validated by the public calls;
// index values (slot ids, positions, block tables) are validated on the host unless the stream
// is being captured, in which case the kernel guards them (rows naming bad indices are written
// as NaN).
#pragma once

#include <cstdint>

#include "attention/chunks.h"
#include "turbodecode/attention.h"

namespace turbodecode::cuda {

// The automatic chunk policy's limits on CUDA (chunks.h).
attention::ChunkLimits chunk_limits(int head_dim);

// Sets the plan's CUDA fields for the current device: the blocks of the persistent launch and
// the workspace size. Every other field of `plan` is set.
void plan_decode(DecodePlan& plan);

void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const DecodeShard& shard,
                const TensorView& out, const TensorView& lse, const TensorView& workspace,
                Stream stream);

}  // namespace turbodecode::cuda
