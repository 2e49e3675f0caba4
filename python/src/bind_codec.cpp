#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "array_args.h"
#include "bindings.h"
#include "operators.h"
#include "turbodecode/tq_codec.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace turbodecode::python {
namespace {

std::vector<std::string> format_names() {
  std::vector<std::string> names;
  for (RowFormat format : kRowFormats) names.emplace_back(format_name(format));
  return names;
}

}  // namespace

void bind_codec(nb::module_& m) {
  m.def("format_names", &format_names, "Every row format, in the library's order.");
  m.def(
      "is_quantized", [](const std::string& f) { return is_quantized(parse_format(f)); },
      "format"_a);
  m.def(
      "is_turboquant", [](const std::string& f) { return is_turboquant(parse_format(f)); },
      "format"_a);
  m.def(
      "format_bits", [](const std::string& f) { return format_bits(parse_format(f)); }, "format"_a);
  m.def(
      "row_bytes",
      [](const std::string& f, int head_dim) { return row_bytes(parse_format(f), head_dim); },
      "format"_a, "head_dim"_a);
  m.def("norms_per_row", &norms_per_row, "head_dim"_a);
  m.def(
      "row_scales",
      [](const std::string& f, int head_dim) { return row_scales(parse_format(f), head_dim); },
      "format"_a, "head_dim"_a);
  m.def("encode_rows", &ops::encode_rows<ArrayArgs>, "head_dim"_a, "format"_a,
        "scale_factor_d512"_a, "x"_a, "codes"_a, "norms"_a,
        "Rows to codes and scales (tq_codec.h, encode_rows).");
  m.def("decode_rows", &ops::decode_rows<ArrayArgs>, "head_dim"_a, "format"_a,
        "scale_factor_d512"_a, "codes"_a, "norms"_a, "y"_a,
        "Codes and scales to rows (tq_codec.h, decode_rows).");
  m.def("rotate_rows", &ops::rotate_rows<ArrayArgs>, "head_dim"_a, "x"_a, "y"_a,
        "y = R_D(x) (tq_codec.h, rotate_rows).");
  m.def("unrotate_rows", &ops::unrotate_rows<ArrayArgs>, "head_dim"_a, "y"_a, "x"_a,
        "x = R_D⁻¹(y) (tq_codec.h, unrotate_rows).");
}

}  // namespace turbodecode::python
