#include "torch_tensor.h"

#include <string>
#include <utility>

#include "errors.h"
#include "view_rules.h"

namespace nb = nanobind;

namespace turbodecode::python {
namespace {

// torch's objects, looked up once torch has been imported (by the caller: this file never
// imports it).
struct TorchObjects {
  nb::object tensor_type;
  std::pair<nb::object, DType> dtypes[6];
  nb::object current_raw_stream;  // torch._C._cuda_getCurrentRawStream

  static const TorchObjects* get() {
    static const TorchObjects* objects = nullptr;
    if (objects) return objects;
    nb::object torch = nb::steal(PyImport_GetModule(nb::str("torch").ptr()));
    if (!torch.is_valid()) {
      PyErr_Clear();
      return nullptr;
    }
    auto* loaded = new TorchObjects;  // lives as long as the process, as torch does
    loaded->tensor_type = torch.attr("Tensor");
    loaded->dtypes[0] = {torch.attr("float32"), DType::f32};
    loaded->dtypes[1] = {torch.attr("float16"), DType::f16};
    loaded->dtypes[2] = {torch.attr("bfloat16"), DType::bf16};
    loaded->dtypes[3] = {torch.attr("uint8"), DType::u8};
    loaded->dtypes[4] = {torch.attr("int32"), DType::i32};
    loaded->dtypes[5] = {torch.attr("float8_e4m3fn"), DType::u8};
    nb::object c_module = torch.attr("_C");
    if (nb::hasattr(c_module, "_cuda_getCurrentRawStream")) {
      loaded->current_raw_stream = c_module.attr("_cuda_getCurrentRawStream");
    }
    objects = loaded;
    return objects;
  }
};

// torch.Size and Tensor.stride() are tuples of ints.
void read_extents(nb::handle sizes, std::array<std::int64_t, kMaxRank>& extents) {
  const Py_ssize_t rank = PyTuple_GET_SIZE(sizes.ptr());
  for (Py_ssize_t d = 0; d < rank; ++d) {
    extents[static_cast<std::size_t>(d)] = PyLong_AsLongLong(PyTuple_GET_ITEM(sizes.ptr(), d));
  }
  if (PyErr_Occurred()) throw nb::python_error();
}

}  // namespace

bool is_torch_tensor(nb::handle obj) {
  const TorchObjects* torch = TorchObjects::get();
  return torch && PyObject_TypeCheck(obj.ptr(), (PyTypeObject*)torch->tensor_type.ptr());
}

TensorView torch_tensor_view(nb::handle obj, const char* name, int* cuda_index) {
  const TorchObjects* torch = TorchObjects::get();
  TensorView view;
  nb::object dtype = obj.attr("dtype");
  bool known_dtype = false;
  for (const auto& [torch_dtype, dt] : torch->dtypes) {
    if (dtype.is(torch_dtype)) {
      view.dtype = dt;
      known_dtype = true;
      break;
    }
  }
  if (!known_dtype) {
    throw_type_error(name, "dtype " + std::string(nb::str(dtype).c_str()) + " is not one of " +
                               kTorchDtypeNames);
  }
  if (nb::cast<bool>(obj.attr("is_cuda"))) {
    view.device = Device::cuda;
    *cuda_index = nb::cast<int>(obj.attr("get_device")());
  } else if (nb::cast<bool>(obj.attr("is_cpu"))) {
    view.device = Device::cpu;
    *cuda_index = -1;
  } else {
    throw_type_error(
        name, "must live on cpu or cuda, not " + std::string(nb::str(obj.attr("device")).c_str()));
  }
  nb::object shape = obj.attr("shape");
  nb::object strides = obj.attr("stride")();
  view.rank = view_rank(PyTuple_GET_SIZE(shape.ptr()), name);
  read_extents(shape, view.shape);
  read_extents(strides, view.strides);
  view.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(obj.attr("data_ptr")()));
  return view;
}

void* torch_current_stream(int cuda_index) {
  const TorchObjects* torch = TorchObjects::get();
  if (!torch || !torch->current_raw_stream.is_valid()) return nullptr;
  return reinterpret_cast<void*>(nb::cast<std::uintptr_t>(torch->current_raw_stream(cuda_index)));
}

}  // namespace turbodecode::python
