// torch.Tensor arguments read through their Python attributes. A DLPack export costs several
// microseconds per tensor (torch's __dlpack__ is Python code); a handful of attribute reads cost
// far less, and torch stays an optional dependency (no libtorch headers or ABI).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>

#include "turbodecode/tensor.h"

namespace turbodecode::python {

// True for torch.Tensor and its subclasses (False without torch imported).
bool is_torch_tensor(nanobind::handle obj);

// The view of a torch tensor; *cuda_index is its CUDA device index, or -1 on the CPU.
// float8_e4m3fn tensors read as u8 (FP8 cache rows are bytes to the library).
TensorView torch_tensor_view(nanobind::handle obj, const char* name, int* cuda_index);

// torch's current CUDA stream on device `cuda_index` (a cudaStream_t).
void* torch_current_stream(int cuda_index);

}  // namespace turbodecode::python
