// The CLI's argument checks: an InvalidArgument naming the option or file and the rule, as the
// library's own calls report theirs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "turbodecode/error.h"

namespace turbodecode::cli {

inline void check_arg(bool ok, std::string_view argument, std::string_view rule) {
  if (!ok) throw InvalidArgument(std::string(argument), std::string(rule));
}

// True when the product of `factors` (each >= 0) is at most `limit`: sizes from flags and files
// are checked with it before they size anything. In double, the product cannot overflow for
// any int64 factors, and it is exact whenever it is below 2^53, far above any limit here.
inline bool product_at_most(std::initializer_list<std::int64_t> factors, std::int64_t limit) {
  double product = 1.0;
  for (std::int64_t factor : factors) product *= static_cast<double>(factor);
  return product <= static_cast<double>(limit);
}

}  // namespace turbodecode::cli
