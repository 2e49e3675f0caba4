// The extension turbodecode._turbodecode, one binder per public header. Its functions are the
// low-level layer under the Python package: configurations arrive as keys (keys.h), arrays as
// any numpy array, torch tensor or DLPack object (array_args.h), and the operators are the
// bodies of operators.h, whose argument order is the schema of the torch.ops.turbodecode op.
#pragma once

#include <nanobind/nanobind.h>

namespace turbodecode::python {

void bind_cache(nanobind::module_& m);      // kv_cache.h
void bind_attention(nanobind::module_& m);  // attention.h
void bind_codec(nanobind::module_& m);      // tq_codec.h
void bind_hc(nanobind::module_& m);         // hc.h
void bind_q8(nanobind::module_& m);         // q8.h

}  // namespace turbodecode::python
