// torch tensors as the TensorViews of one library call: the torch operator library's adapter
// for operators.h. Dtype, shape, strides (in elements), device and data pointer come from the
// at::Tensor itself, without Python.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>

#include <optional>

#include "turbodecode/tensor.h"

namespace turbodecode::python {

class TensorArgs {
 public:
  using Array = const at::Tensor&;
  using OptionalArray = const std::optional<at::Tensor>&;

  // `name` is the argument as the C++ API and its error messages spell it.
  TensorView input(const at::Tensor& t, const char* name) { return view(t, name, false); }
  TensorView output(const at::Tensor& t, const char* name) { return view(t, name, true); }
  TensorView optional_input(const std::optional<at::Tensor>& t, const char* name) {
    return t ? input(*t, name) : TensorView{};
  }
  TensorView optional_output(const std::optional<at::Tensor>& t, const char* name) {
    return t ? output(*t, name) : TensorView{};
  }

  // Runs call(stream) on the CUDA device the tensors live on, on torch's current stream there
  // (so the work follows torch's stream semantics and CUDA-graph capture).
  template <class Call>
  void run(Call&& call) {
    if (cuda_index_ < 0) {
      call(Stream{});
      return;
    }
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::CUDA, cuda_index_));
    call(Stream{current_cuda_stream(cuda_index_)});
  }

 private:
  TensorView view(const at::Tensor& t, const char* name, bool writable);
  static void* current_cuda_stream(c10::DeviceIndex index);

  c10::DeviceIndex cuda_index_ = -1;
};

}  // namespace turbodecode::python
