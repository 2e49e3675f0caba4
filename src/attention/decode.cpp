// run_decode: the one validation of SPEC §7, then the backend of the cache's device.
#include "attention/decode_cpu.h"
#include "attention/validate_decode.h"
#include "common/validate.h"
#include "turbodecode/attention.h"

#ifdef TURBODECODE_WITH_CUDA
#include "attention/cuda/decode_cuda.h"
#endif

namespace turbodecode {

void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                const TensorView& workspace, Stream stream) {
  run_decode(plan, cache, q, slot_ids, seq_pos, out, TensorView{}, workspace, stream);
}

void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                const TensorView& lse, const TensorView& workspace, Stream stream) {
  run_decode(plan, cache, q, slot_ids, seq_pos, DecodeShard{}, out, lse, workspace, stream);
}

void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const DecodeShard& shard,
                const TensorView& out, const TensorView& lse, const TensorView& workspace,
                Stream stream) {
  attention::validate_decode(plan, cache, q, slot_ids, seq_pos, shard, out, lse, workspace, stream);
#ifdef TURBODECODE_WITH_CUDA
  if (plan.cache.device == Device::cuda) {
    cuda::run_decode(plan, cache, q, slot_ids, seq_pos, shard, out, lse, workspace, stream);
    return;
  }
#endif
  attention::run_decode_cpu(plan, cache, q, slot_ids, seq_pos, shard, out, lse, workspace);
}

}  // namespace turbodecode
