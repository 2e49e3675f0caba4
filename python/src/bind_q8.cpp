#include <nanobind/nanobind.h>

#include "array_args.h"
#include "bindings.h"
#include "operators.h"
#include "turbodecode/q8.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace turbodecode::python {

void bind_q8(nb::module_& m) {
  m.attr("Q8_BLOCK_VALUES") = kQ8BlockValues;
  m.attr("Q8_BLOCK_BYTES") = kQ8BlockBytes;
  m.def("q8_row_bytes", &q8_row_bytes, "cols"_a, "Bytes of one Q8_0 row of `cols` weights.");
  m.def("quantize_q8_0", &ops::quantize_q8_0<ArrayArgs>, "src"_a, "dst"_a,
        "f32 rows to Q8_0 on the CPU (q8.h, quantize_q8_0).");
  m.def("q8_matvec", &ops::q8_matvec<ArrayArgs>, "weight"_a, "input"_a, "out"_a,
        "out = weight·input over Q8_0 rows (q8.h, q8_matvec).");
}

}  // namespace turbodecode::python
