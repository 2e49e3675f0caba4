// Split kernels with tq_byte K rows (split_launch.h lists the instances).
#include "attention/cuda/split_kernel.cuh"
#include "attention/cuda/split_launch.h"

namespace turbodecode::cuda::decode {

TD_SPLIT_INSTANCES(, RowCodec::tq_byte)

}  // namespace turbodecode::cuda::decode
