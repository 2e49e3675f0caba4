// Decode kernel instances with fp8 K rows at head dim 512.
#include "attention/cuda/decode_kernel.cuh"

namespace turbodecode::cuda::decode {

TD_DECODE_INSTANCES(, 512, RowFormat::fp8)

}  // namespace turbodecode::cuda::decode
