// merge_attention: validate, then run on the tensors' device.
#include "shard/merge_cpu.h"
#include "shard/validate_merge.h"
#include "turbodecode/sharded_decode.h"

#ifdef TURBODECODE_WITH_CUDA
#include "shard/cuda/shard_cuda.h"
#endif

namespace turbodecode {

void merge_attention(const TensorView& parts_out, const TensorView& parts_lse,
                     const TensorView& out, const TensorView& lse, Stream stream) {
  const shard::MergeArgs args = shard::validate_merge(parts_out, parts_lse, out, lse);
  if (parts_out.device == Device::cpu) {
    shard::merge_cpu(args);
    return;
  }
#ifdef TURBODECODE_WITH_CUDA
  cuda::merge_attention(args, stream);
#endif
}

}  // namespace turbodecode
