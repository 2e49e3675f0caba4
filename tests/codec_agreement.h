// How closely two row encoders must agree (SPEC §5): identical TurboQuant-HB codes except that
// at most 0.1% may differ by ±1 (u within 1e-6 of a boundary), identical FP8 codes, norms and
// scales within 1e-6 relative. Shared by the GPU tests that compare the CUDA encoder with the
// CPU one; with the round-trip quality every backend's encoder must meet.
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

// Code e of a stored row: SPEC §1.2/§1.5 layouts are all the little-endian bit stream with code e
// at bits [b·e, b·e + b).
inline int stored_code(const std::uint8_t* row, int bits, std::int64_t e) {
  int code = 0;
  for (int k = 0; k < bits; ++k) {
    const std::int64_t bit = bits * e + k;
    code |= ((row[bit / 8] >> (bit % 8)) & 1) << k;
  }
  return code;
}

// Adds the codes of one stored row of `bytes` bytes in `format`: TQ codes may differ by ±1, FP8
// codes (bytes) count as beyond one whenever they differ.
inline void compare_code_row(const std::uint8_t* a, const std::uint8_t* b, std::int64_t bytes,
                             RowFormat format, CodeAgreement& agreement) {
  const int bits = format_bits(format);
  const int allowed = is_turboquant(format) ? 1 : 0;
  for (std::int64_t e = 0; e < bytes * 8 / bits; ++e) {
    const int code_a = stored_code(a, bits, e);
    const int code_b = stored_code(b, bits, e);
    ++agreement.elements;
    if (code_a != code_b) ++agreement.differing;
    if (std::abs(code_a - code_b) > allowed) ++agreement.beyond_one;
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
    case RowFormat::tq4:
      return 0.99;
    case RowFormat::tq3:
      return 0.98;
    default:  // fp8: 3 mantissa bits, about 2% relative error per element
      return 0.999;
  }
}

}  // namespace turbodecode::testing
