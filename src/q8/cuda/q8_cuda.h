// CUDA backend of the Q8_0 matvec (called only under TURBODECODE_WITH_CUDA).
#pragma once

#include "q8/q8_args.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

void q8_matvec(const q8::MatvecArgs& args, Stream stream);

}  // namespace turbodecode::cuda
