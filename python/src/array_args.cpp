#include "array_args.h"

#include <string>

#include "errors.h"
#include "view_rules.h"

namespace nb = nanobind;

namespace turbodecode::python {
namespace {

bool dtype_of(nb::dlpack::dtype dt, DType* out) {
  using Code = nb::dlpack::dtype_code;
  if (dt.lanes != 1) return false;
  const auto code = static_cast<Code>(dt.code);
  if (code == Code::Float && dt.bits == 32)
    *out = DType::f32;
  else if (code == Code::Float && dt.bits == 16)
    *out = DType::f16;
  else if (code == Code::Bfloat && dt.bits == 16)
    *out = DType::bf16;
  else if (code == Code::UInt && dt.bits == 8)
    *out = DType::u8;
  else if (code == Code::Int && dt.bits == 32)
    *out = DType::i32;
  else
    return false;
  return true;
}

std::string type_name_of(nb::handle obj) {
  return nb::type_name(obj.type()).c_str();
}

template <class Array>
TensorView view_of(const Array& array, const char* name) {
  TensorView view;
  if (!dtype_of(array.dtype(), &view.dtype)) {
    throw_type_error(name, "dtype must be float32, float16, bfloat16, uint8 or int32");
  }
  view.rank = view_rank(static_cast<std::int64_t>(array.ndim()), name);
  for (int d = 0; d < view.rank; ++d) {
    view.shape[d] = static_cast<std::int64_t>(array.shape(d));
    view.strides[d] = array.stride(d);
  }
  view.data = const_cast<void*>(static_cast<const void*>(array.data()));
  return view;
}

}  // namespace

TensorView ArrayArgs::view(nb::handle obj, const char* name, bool writable) {
  if (is_torch_tensor(obj)) {
    int cuda_index = -1;
    TensorView view = torch_tensor_view(obj, name, &cuda_index);
    if (view.device == Device::cuda) note_cuda_device(cuda_index, true, name);
    return view;
  }
  return dlpack_view(obj, name, writable);
}

TensorView ArrayArgs::dlpack_view(nb::handle obj, const char* name, bool writable) {
  TensorView view;
  int device_type = 0;
  int device_id = 0;
  if (writable) {
    nb::ndarray<> array;
    if (!nb::try_cast(obj, array, false)) {
      throw_type_error(
          name, "expected a writable array (numpy, torch or DLPack), got " + type_name_of(obj));
    }
    view = view_of(array, name);
    device_type = array.device_type();
    device_id = array.device_id();
    outputs_.push_back(std::move(array));
  } else {
    nb::ndarray<nb::ro> array;
    if (!nb::try_cast(obj, array, false)) {
      throw_type_error(name,
                       "expected an array (numpy, torch or DLPack), got " + type_name_of(obj));
    }
    view = view_of(array, name);
    device_type = array.device_type();
    device_id = array.device_id();
    inputs_.push_back(std::move(array));
  }
  if (device_type == nb::device::cpu::value || device_type == nb::device::cuda_host::value) {
    view.device = Device::cpu;
  } else if (device_type == nb::device::cuda::value ||
             device_type == nb::device::cuda_managed::value) {
    view.device = Device::cuda;
    note_cuda_device(device_id, false, name);
  } else {
    throw_type_error(name, "must live on the CPU or a CUDA device");
  }
  return view;
}

void ArrayArgs::note_cuda_device(int index, bool torch, const char* name) {
  cuda_index_ = common_cuda_device(cuda_index_, index, name);
  torch_cuda_ = torch_cuda_ || torch;
}

}  // namespace turbodecode::python
