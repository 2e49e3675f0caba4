// Rules every array adapter (ArrayArgs, TensorArgs) applies while it builds a TensorView, with
// their messages.
#pragma once

#include <cstdint>
#include <string>

#include "turbodecode/error.h"
#include "turbodecode/tensor.h"

namespace turbodecode::python {

// The torch dtypes the library reads; float8_e4m3fn tensors (FP8 cache rows) read as bytes.
inline constexpr const char* kTorchDtypeNames =
    "float32, float16, bfloat16, uint8, int32, float8_e4m3fn";

// `rank` as a view's rank; InvalidArgument naming the argument beyond kMaxRank dimensions.
inline int view_rank(std::int64_t rank, const char* name) {
  if (rank > kMaxRank) {
    throw InvalidArgument(name, "has " + std::to_string(rank) + " dimensions; at most " +
                                    std::to_string(kMaxRank) + " are supported");
  }
  return static_cast<int>(rank);
}

// The CUDA device of every array of a call so far: `index`, the device of the array `name`,
// which must be `known` unless no array was on a CUDA device before (known < 0).
inline int common_cuda_device(int known, int index, const char* name) {
  if (known >= 0 && index != known) {
    throw InvalidArgument(name, "lives on CUDA device " + std::to_string(index) +
                                    ", the other arrays on device " + std::to_string(known));
  }
  return index;
}

}  // namespace turbodecode::python
