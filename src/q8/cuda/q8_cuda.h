// CUDA backend of the Q8_0 matvec (called only under TURBODECODE_WITH_CUDA).
#pragma once

#include "q8/q8_args.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

// T ≤ kQ8TileTokens: the CUDA-core warp kernel; larger T: q8_matvec_mma.
void q8_matvec(const q8::MatvecArgs& args, Stream stream);
// The tensor-core path (q8_mma_matvec.cu), for prefill. Rows computed by the two paths differ
// in the last bits: each path is batch-invariant within its own range of T.
void q8_matvec_mma(const q8::MatvecArgs& args, Stream stream);

}  // namespace turbodecode::cuda
