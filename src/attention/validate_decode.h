// The one validation function of run_decode (SPEC §7), shared by the CPU and CUDA backends.
#pragma once

#include "turbodecode/attention.h"

namespace turbodecode::attention {

// Checks every tensor argument against the plan (lse only when present), then the index values
// (slot ids, positions, the runs of query_tokens rows), which it reads on the host; on CUDA
// that copy is skipped while `stream` is being captured. Throws InvalidArgument naming the
// argument; touches no output.
void validate_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                     const TensorView& slot_ids, const TensorView& seq_pos,
                     const DecodeShard& shard, const TensorView& out, const TensorView& lse,
                     const TensorView& workspace, Stream stream);

}  // namespace turbodecode::attention
