// Python arrays as the TensorViews of one library call, without copies: torch tensors through
// their attributes (torch_tensor.h), anything else (numpy, CuPy, JAX, ...) through DLPack or the
// buffer protocol (nanobind's ndarray).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <utility>
#include <vector>

#include "cuda_device_guard.h"
#include "torch_tensor.h"
#include "turbodecode/tensor.h"

namespace turbodecode::python {

class ArrayArgs {
 public:
  // The argument types of the operators (operators.h); None is an absent optional array.
  using Array = nanobind::handle;
  using OptionalArray = nanobind::handle;

  // `name` is the argument as the C++ API and its error messages spell it.
  TensorView input(nanobind::handle obj, const char* name) { return view(obj, name, false); }
  TensorView output(nanobind::handle obj, const char* name) { return view(obj, name, true); }
  // None gives an absent view.
  TensorView optional_input(nanobind::handle obj, const char* name) {
    return obj.is_none() ? TensorView{} : input(obj, name);
  }
  TensorView optional_output(nanobind::handle obj, const char* name) {
    return obj.is_none() ? TensorView{} : output(obj, name);
  }

  // Runs call(stream) with the GIL released, on the CUDA device the arrays live on. The stream
  // is torch's current stream on that device when the arrays are torch tensors (so the work
  // follows torch's stream semantics and CUDA-graph capture), else the default stream.
  template <class Call>
  void run(Call&& call) {
    const Stream stream{torch_cuda_ ? torch_current_stream(cuda_index_) : nullptr};
    CudaDeviceGuard guard(cuda_index_);
    nanobind::gil_scoped_release release;
    call(stream);
  }

 private:
  TensorView view(nanobind::handle obj, const char* name, bool writable);
  TensorView dlpack_view(nanobind::handle obj, const char* name, bool writable);
  void note_cuda_device(int index, bool torch, const char* name);

  // Imported arrays stay referenced until the call returns.
  std::vector<nanobind::ndarray<nanobind::ro>> inputs_;
  std::vector<nanobind::ndarray<>> outputs_;
  int cuda_index_ = -1;
  bool torch_cuda_ = false;
};

}  // namespace turbodecode::python
