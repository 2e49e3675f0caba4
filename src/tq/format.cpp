// Row formats: names, bit widths and stored sizes (SPEC §1.2-1.3).
#include <string>

#include "common/validate.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode {

namespace {

constexpr RowFormat kAllFormats[] = {RowFormat::f16, RowFormat::tq4, RowFormat::tq5, RowFormat::tq6,
                                     RowFormat::tq8};

}  // namespace

bool is_quantized(RowFormat format) {
  return format != RowFormat::f16;
}

int format_bits(RowFormat format) {
  switch (format) {
    case RowFormat::f16:
      return 16;
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
  for (RowFormat format : kAllFormats) {
    if (name == format_name(format)) return format;
  }
  throw InvalidArgument("format",
                        "must be one of f16, tq4, tq5, tq6, tq8, not '" + std::string(name) + "'");
}

std::int64_t row_bytes(RowFormat format, int head_dim) {
  if (format == RowFormat::f16) return 2 * static_cast<std::int64_t>(head_dim);
  if (format == RowFormat::tq4) return head_dim / 2;
  return head_dim;
}

int norms_per_row(int head_dim) {
  return head_dim == 512 ? 2 : 1;
}

}  // namespace turbodecode
