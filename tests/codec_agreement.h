// How closely two TurboQuant-HB encoders must agree (SPEC §5): identical codes except that at
// most 0.1% may differ by ±1 (u within 1e-6 of a boundary), norms within 1e-6 relative. Shared
// by the GPU tests that compare the CUDA encoder with the CPU one; with the round-trip quality
// every backend's encoder must meet.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "turbodecode/tq_codec.h"

namespace turbodecode::testing {

struct CodeAgreement {
  std::int64_t elements = 0;
  std::int64_t differing = 0;   // codes that differ at all
  std::int64_t beyond_one = 0;  // codes that differ by more than ±1

  bool within_spec() const { return beyond_one == 0 && differing * 1000 <= elements; }
  std::string describe() const {
    return std::to_string(differing) + " of " + std::to_string(elements) + " codes differ, " +
           std::to_string(beyond_one) + " by more than 1";
  }
};

// Adds the codes of one stored row (`bytes` bytes; two codes per byte when bits == 4).
inline void compare_code_row(const std::uint8_t* a, const std::uint8_t* b, std::int64_t bytes,
                             int bits, CodeAgreement& agreement) {
  const int per_byte = bits == 4 ? 2 : 1;
  for (std::int64_t i = 0; i < bytes; ++i) {
    for (int half = 0; half < per_byte; ++half) {
      const int shift = 4 * half;
      const int mask = bits == 4 ? 0x0f : 0xff;
      const int code_a = (a[i] >> shift) & mask;
      const int code_b = (b[i] >> shift) & mask;
      ++agreement.elements;
      if (code_a != code_b) ++agreement.differing;
      if (std::abs(code_a - code_b) > 1) ++agreement.beyond_one;
    }
  }
}

// Norms agree within 1e-6 relative; two NaNs agree (payloads may differ between backends).
inline bool norms_agree(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;
  return std::fabs(a - b) <= 1e-6f * std::fmax(std::fabs(a), std::fabs(b));
}

// Least cosine similarity of a row and its encode → decode round trip (SPEC §1.2 quality).
inline double min_round_trip_cosine(RowFormat format) {
  switch (format) {
    case RowFormat::tq8:
      return 0.9999;
    case RowFormat::tq6:
      return 0.999;
    case RowFormat::tq5:
      return 0.998;
    default:
      return 0.99;
  }
}

}  // namespace turbodecode::testing
