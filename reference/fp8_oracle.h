// Double-precision reference of FP8 E4M3 rows (SPEC §1.6), written from the format's definition
// (sign, 4 exponent bits with bias 7, 3 mantissa bits, subnormals, 0x7F/0xFF NaN) by scanning
// every code, independently of the library's bit manipulation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace turbodecode::oracle {

inline constexpr double kFp8MaxFinite = 448.0;

// The value of an E4M3 code (NaN for 0x7F and 0xFF).
double fp8_value(int code);

// One encoded row: scale = amax / 448, a code per element (the E4M3 value nearest x / scale,
// ties to the even code, saturated to ±448; a zero row has scale 0 and codes 0), and the scaled
// values q = x / scale the codes were chosen for.
struct Fp8EncodedRow {
  std::vector<int> codes;
  double scale = 0.0;
  std::vector<double> scaled;
};

Fp8EncodedRow fp8_encode(std::span<const double> x);
std::vector<double> fp8_decode(std::span<const int> codes, double scale);

// Relative distance from q to the nearest rounding boundary of E4M3 (a midpoint between two
// neighbouring values): an f32 encoder's q differs from this oracle's by rounding (≈ 1e-7
// relative), so codes may differ by one step where this is tiny.
double fp8_boundary_distance(double q);
inline constexpr double kFp8BoundaryTolerance = 1e-6;

}  // namespace turbodecode::oracle
