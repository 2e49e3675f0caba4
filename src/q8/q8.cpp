// Public entry point of the Q8_0 matvec: validate, then dispatch on the tensors' device.
#include "turbodecode/q8.h"
#include "q8/validate_q8.h"

#ifdef TURBODECODE_WITH_CUDA
#include "q8/cuda/q8_cuda.h"
#endif

namespace turbodecode {

void q8_matvec(const TensorView& weight, const TensorView& input, const TensorView& out,
               Stream stream) {
  const q8::MatvecArgs args = q8::validate_q8_matvec(weight, input, out);
  if (input.device == Device::cpu) {
    q8::matvec_cpu(args);
    return;
  }
#ifdef TURBODECODE_WITH_CUDA
  cuda::q8_matvec(args, stream);
#endif
}

}  // namespace turbodecode
