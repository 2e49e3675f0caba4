// The library's exceptions as Python exceptions: turbodecode.Error (a RuntimeError),
// turbodecode.InvalidArgument (also a ValueError, with .argument and .rule) and
// turbodecode.CudaError (with .call and .code).
#pragma once

#include <nanobind/nanobind.h>

#include <string>

namespace turbodecode::python {

void register_errors(nanobind::module_& m);

// A Python TypeError naming the argument, for values that are not arrays at all or whose dtype
// or device the library has no name for.
[[noreturn]] void throw_type_error(const char* argument, const std::string& rule);

}  // namespace turbodecode::python
