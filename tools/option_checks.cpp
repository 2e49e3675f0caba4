#include "option_checks.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "tensor_files.h"
#include "turbodecode/attention.h"
#include "turbodecode/error.h"
#include "turbodecode/kv_cache.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::cli {
namespace {

// For f32 options. Text that is not a number passes: CLI11's conversion then reports it.
CLI::Validator finite_number(bool allow_zero, const char* rule) {
  return CLI::Validator(
      [allow_zero, rule](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "";
        const bool ok = std::abs(value) <= std::numeric_limits<float>::max() &&
                        (value > 0.0 || (allow_zero && value == 0.0));
        return ok ? "" : std::string(rule) + ", not " + text;
      },
      allow_zero ? "FINITE >= 0" : "FINITE > 0");
}

// Runs `check` on the text; the rule of the InvalidArgument it throws is the validator's message.
template <class Check>
CLI::Validator rule_of(Check check, const char* description) {
  return CLI::Validator(
      [check](std::string& text) -> std::string {
        try {
          check(text);
        } catch (const InvalidArgument& error) {
          return error.rule();
        }
        return "";
      },
      description);
}

}  // namespace

CLI::Validator row_format_name() {
  return rule_of([](const std::string& name) { parse_format(name); }, "FORMAT");
}

CLI::Validator key_format_name() {
  return rule_of(
      [](const std::string& name) {
        KvCacheConfig cache;
        cache.capacity = 1;
        cache.k_format = parse_format(name);
        plan_decode(cache, {.n_heads = cache.n_kv_heads}, 1);
      },
      "FORMAT");
}

CLI::Validator finite_non_negative() {
  return finite_number(true, "must be a finite number >= 0");
}

CLI::Validator finite_positive() {
  return finite_number(false, "must be a finite number > 0");
}

CLI::Validator tensor_file_name() {
  return rule_of(check_tensor_file_name, "FILE");
}

}  // namespace turbodecode::cli
