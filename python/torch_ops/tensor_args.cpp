#include "tensor_args.h"

#include <c10/util/Exception.h>

#ifdef TURBODECODE_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "view_rules.h"

namespace turbodecode::python {
namespace {

bool dtype_of(c10::ScalarType type, DType* out) {
  switch (type) {
    case c10::ScalarType::Float:
      *out = DType::f32;
      return true;
    case c10::ScalarType::Half:
      *out = DType::f16;
      return true;
    case c10::ScalarType::BFloat16:
      *out = DType::bf16;
      return true;
    case c10::ScalarType::Byte:
    case c10::ScalarType::Float8_e4m3fn:
      *out = DType::u8;
      return true;
    case c10::ScalarType::Int:
      *out = DType::i32;
      return true;
    default:
      return false;
  }
}

}  // namespace

TensorView TensorArgs::view(const at::Tensor& t, const char* name, bool writable) {
  TensorView view;
  TORCH_CHECK_TYPE(dtype_of(t.scalar_type(), &view.dtype), "argument '", name, "': dtype ",
                   t.scalar_type(), " is not one of ", kTorchDtypeNames);
  if (t.is_cuda()) {
    view.device = Device::cuda;
    cuda_index_ =
        static_cast<c10::DeviceIndex>(common_cuda_device(cuda_index_, t.device().index(), name));
  } else {
    TORCH_CHECK_TYPE(t.is_cpu(), "argument '", name, "': must live on cpu or cuda, not ",
                     t.device());
  }
  view.rank = view_rank(t.dim(), name);
  for (int d = 0; d < view.rank; ++d) {
    view.shape[d] = t.sizes()[d];
    view.strides[d] = t.strides()[d];
  }
  view.data = writable ? t.mutable_data_ptr() : const_cast<void*>(t.const_data_ptr());
  return view;
}

void* TensorArgs::current_cuda_stream(c10::DeviceIndex index) {
#ifdef TURBODECODE_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream(index).stream();
#else
  return nullptr;  // a torch without CUDA has no CUDA tensors
#endif
}

}  // namespace turbodecode::python
