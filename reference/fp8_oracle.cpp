#include "reference/fp8_oracle.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace turbodecode::oracle {

namespace {

constexpr int kSignBit = 0x80;
constexpr int kLargestFiniteCode = 0x7e;

// The values of the non-negative finite codes, ascending with the code.
const std::array<double, kLargestFiniteCode + 1>& magnitudes() {
  static const auto table = [] {
    std::array<double, kLargestFiniteCode + 1> values{};
    for (int code = 0; code <= kLargestFiniteCode; ++code) values[code] = fp8_value(code);
    return values;
  }();
  return table;
}

// Code of the E4M3 value nearest |q| (q finite), ties to the even code, saturated at 448.
int nearest_magnitude_code(double magnitude) {
  magnitude = std::min(magnitude, kFp8MaxFinite);
  int best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int code = 0; code <= kLargestFiniteCode; ++code) {
    const double distance = std::abs(magnitudes()[code] - magnitude);
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
      best_distance = distance;
      best = code;
    }
  }
  return best;
}

}  // namespace

double fp8_value(int code) {
  const int exponent_bits = (code >> 3) & 15;
  const int mantissa_bits = code & 7;
  if (exponent_bits == 15 && mantissa_bits == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent_bits == 0
                               ? std::ldexp(mantissa_bits / 8.0, 1 - 7)
                               : std::ldexp(1.0 + mantissa_bits / 8.0, exponent_bits - 7);
  return (code & kSignBit) ? -magnitude : magnitude;
}

Fp8EncodedRow fp8_encode(std::span<const double> x) {
  Fp8EncodedRow row;
  double amax = 0.0;
  for (double v : x) {
    if (!std::isnan(v)) amax = std::max(amax, std::abs(v));
  }
  row.scale = amax / kFp8MaxFinite;
  for (double v : x) {
    const double q = row.scale > 0.0 ? v / row.scale : 0.0;
    row.scaled.push_back(q);
    if (std::isnan(v)) {
      row.codes.push_back(0x7f);
      continue;
    }
    const int sign = std::signbit(q) ? kSignBit : 0;
    row.codes.push_back(sign | nearest_magnitude_code(std::abs(q)));
  }
  return row;
}

std::vector<double> fp8_decode(std::span<const int> codes, double scale) {
  std::vector<double> x;
  for (int code : codes) x.push_back(scale * fp8_value(code));
  return x;
}

double fp8_boundary_distance(double q) {
  const double magnitude = std::abs(q);
  double nearest = std::numeric_limits<double>::infinity();
  for (int code = 0; code < kLargestFiniteCode; ++code) {
    const double midpoint = (magnitudes()[code] + magnitudes()[code + 1]) / 2.0;
    nearest = std::min(nearest, std::abs(magnitude - midpoint));
  }
  return magnitude > 0.0 ? nearest / magnitude : nearest;
}

}  // namespace turbodecode::oracle
