// Split kernels with tq_nibble K rows (split_launch.h lists the instances).
#include "attention/cuda/split_kernel.cuh"
#include "attention/cuda/split_launch.h"

namespace turbodecode::cuda::decode {

TD_SPLIT_INSTANCES(, RowCodec::tq_nibble)

}  // namespace turbodecode::cuda::decode
