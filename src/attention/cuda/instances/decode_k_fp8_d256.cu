// Decode kernel instances with fp8 K rows at head dim 256.
#include "attention/cuda/decode_kernel.cuh"

namespace turbodecode::cuda::decode {

TD_DECODE_INSTANCES(, 256, RowFormat::fp8)

}  // namespace turbodecode::cuda::decode
