// The CLI's argument checks: an InvalidArgument naming the option or file and the rule, as the
// library's own calls report theirs.
#pragma once

#include <string>
#include <string_view>

#include "turbodecode/error.h"

namespace turbodecode::cli {

inline void check_arg(bool ok, std::string_view argument, std::string_view rule) {
  if (!ok) throw InvalidArgument(std::string(argument), std::string(rule));
}

}  // namespace turbodecode::cli
