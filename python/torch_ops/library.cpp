// libturbodecode_torch: torch.ops.turbodecode.* defined and implemented in C++, so that an
// operator goes from torch's dispatcher straight into the library. The schemas and bodies are
// the extension's (operators.h); the fake implementations live in turbodecode._torch_ops,
// which loads this library.
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <string>

#include "operators.h"
#include "tensor_args.h"
#include "turbodecode/error.h"

namespace turbodecode::python {
namespace {

// `kernel` with the library's exceptions as torch's, with the library's messages:
// InvalidArgument becomes a ValueError in Python, any other Error a RuntimeError.
template <auto kernel, class Signature = decltype(kernel)>
struct TorchKernel;

template <auto kernel, class... Args>
struct TorchKernel<kernel, void (*)(Args...)> {
  static void run(Args... args) {
    try {
      kernel(args...);
    } catch (const InvalidArgument& e) {
      C10_THROW_ERROR(ValueError, e.what());
    } catch (const Error& e) {
      C10_THROW_ERROR(Error, e.what());
    }
  }
};

template <auto kernel>
constexpr auto torch_kernel() {
  return TORCH_FN(TorchKernel<kernel>::run);
}

void implement(torch::Library& m) {
  using A = TensorArgs;
  m.impl("append_kv", torch_kernel<&ops::append_kv<A>>());
  m.impl("run_decode", torch_kernel<&ops::run_decode<A>>());
  m.impl("encode_rows", torch_kernel<&ops::encode_rows<A>>());
  m.impl("decode_rows", torch_kernel<&ops::decode_rows<A>>());
  m.impl("rotate_rows", torch_kernel<&ops::rotate_rows<A>>());
  m.impl("unrotate_rows", torch_kernel<&ops::unrotate_rows<A>>());
  m.impl("hc_split", torch_kernel<&ops::hc_split<A>>());
  m.impl("hc_collapse", torch_kernel<&ops::hc_collapse<A>>());
  m.impl("hc_rms_norm", torch_kernel<&ops::hc_rms_norm<A>>());
  m.impl("hc_split_collapse", torch_kernel<&ops::hc_split_collapse<A>>());
  m.impl("hc_split_collapse_norm", torch_kernel<&ops::hc_split_collapse_norm<A>>());
  m.impl("hc_expand", torch_kernel<&ops::hc_expand<A>>());
  m.impl("hc_head_weights", torch_kernel<&ops::hc_head_weights<A>>());
  m.impl("hc_norm_mix", torch_kernel<&ops::hc_norm_mix<A>>());
  m.impl("hc_pre", torch_kernel<&ops::hc_pre<A>>());
  m.impl("hc_expand_q8", torch_kernel<&ops::hc_expand_q8<A>>());
  m.impl("hc_expand_shared_q8", torch_kernel<&ops::hc_expand_shared_q8<A>>());
  m.impl("quantize_q8_0", torch_kernel<&ops::quantize_q8_0<A>>());
  m.impl("q8_matvec", torch_kernel<&ops::q8_matvec<A>>());
}

}  // namespace
}  // namespace turbodecode::python

TORCH_LIBRARY(turbodecode, m) {
  m.set_python_module("turbodecode._torch_ops");  // where the fake implementations are
  for (const auto& op : turbodecode::python::kOperatorSchemas) {
    m.def((std::string(op.name) + op.arguments).c_str());
  }
}

TORCH_LIBRARY_IMPL(turbodecode, CPU, m) {
  turbodecode::python::implement(m);
}

#ifdef TURBODECODE_TORCH_CUDA
TORCH_LIBRARY_IMPL(turbodecode, CUDA, m) {
  turbodecode::python::implement(m);
}
#endif
