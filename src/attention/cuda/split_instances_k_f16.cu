// Split kernels with f16 K rows (split_launch.h lists the instances).
#include "attention/cuda/split_kernel.cuh"
#include "attention/cuda/split_launch.h"

namespace turbodecode::cuda::decode {

TD_SPLIT_INSTANCES(, RowCodec::f16)

}  // namespace turbodecode::cuda::decode
