// Row formats: names, bit widths and stored sizes (SPEC §1.2, §1.5, §1.6).
#include <string>

#include "common/validate.h"
#include "tq/codec_math.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode {

bool is_quantized(RowFormat format) {
  return format != RowFormat::f16;
}

bool is_turboquant(RowFormat format) {
  return is_quantized(format) && format != RowFormat::fp8;
}

int format_bits(RowFormat format) {
  switch (format) {
    case RowFormat::f16:
      return 16;
    case RowFormat::fp8:
      return 8;
    case RowFormat::tq3:
      return 3;
    case RowFormat::tq4:
      return 4;
    case RowFormat::tq5:
      return 5;
    case RowFormat::tq6:
      return 6;
    case RowFormat::tq8:
      return 8;
  }
  return 0;
}

const char* format_name(RowFormat format) {
  switch (format) {
    case RowFormat::f16:
      return "f16";
    case RowFormat::fp8:
      return "fp8";
    case RowFormat::tq3:
      return "tq3";
    case RowFormat::tq4:
      return "tq4";
    case RowFormat::tq5:
      return "tq5";
    case RowFormat::tq6:
      return "tq6";
    case RowFormat::tq8:
      return "tq8";
  }
  return "?";
}

RowFormat parse_format(std::string_view name) {
  std::string names;
  for (RowFormat format : kRowFormats) {
    if (name == format_name(format)) return format;
    names += names.empty() ? "" : ", ";
    names += format_name(format);
  }
  throw InvalidArgument("format", "must be one of " + names + ", not '" + std::string(name) + "'");
}

std::int64_t row_bytes(RowFormat format, int head_dim) {
  switch (format) {
    case RowFormat::f16:
      return 2 * static_cast<std::int64_t>(head_dim);
    case RowFormat::fp8:
      return head_dim;
    default:
      return tq::code_row_bytes(format_bits(format), head_dim);
  }
}

int norms_per_row(int head_dim) {
  return head_dim == 512 ? 2 : 1;
}

int row_scales(RowFormat format, int head_dim) {
  if (!is_quantized(format)) return 0;
  return is_turboquant(format) ? norms_per_row(head_dim) : 1;
}

}  // namespace turbodecode
