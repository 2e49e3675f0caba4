#include <nanobind/nanobind.h>

#include "bindings.h"
#include "errors.h"
#include "operators.h"
#include "turbodecode/buffer.h"

namespace nb = nanobind;

NB_MODULE(_turbodecode, m) {
  using namespace turbodecode;
  m.doc() = "turbodecode's compiled core; use the turbodecode package instead.";
  python::register_errors(m);
  m.def("cuda_available", &cuda_available,
        "True when the CUDA backend was compiled in and a device is visible.");
  m.def("cuda_sm_count", &cuda_sm_count,
        "Streaming multiprocessors of the current CUDA device (0 without one).");
  python::bind_cache(m);
  python::bind_attention(m);
  python::bind_codec(m);
  python::bind_hc(m);
  python::bind_q8(m);
  // The schemas for the Python registration of torch.ops.turbodecode (without the C++ one).
  nb::dict schemas;
  for (const auto& op : python::kOperatorSchemas) schemas[op.name] = op.arguments;
  m.attr("OPERATOR_SCHEMAS") = schemas;
}
