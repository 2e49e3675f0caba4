// Double-precision reference of the TurboQuant-HB codec (SPEC §1.1-1.2), written from the
// definitions (a dense Hadamard matrix, a nearest-centroid scan), independently of the library.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace turbodecode::oracle {

// R_D(x) = H_D · (s ⊙ x) / √D and its inverse s ⊙ (H_D · y / √D), D ∈ {256, 512} (SPEC §1.1).
std::vector<double> tq_rotate(int head_dim, std::span<const double> x);
std::vector<double> tq_unrotate(int head_dim, std::span<const double> y);

// One encoded row: a code per element (unpacked), its norms (1 for D = 256, 2 for D = 512)
// and the scaled values u the codes were chosen for.
struct TqEncodedRow {
  std::vector<int> codes;
  std::vector<double> norms;
  std::vector<double> scaled;
};

TqEncodedRow tq_encode(int head_dim, int bits, double scale_factor_d512, std::span<const double> x);
// The decoded row in the rotated basis (ŷ ≈ R_D x).
std::vector<double> tq_decode(int head_dim, int bits, double scale_factor_d512,
                              std::span<const int> codes, std::span<const double> norms);

// Codes of one stored row (SPEC §1.2, §1.5): one byte per code for 8 bits, two per byte for 4
// bits (even element in the low nibble), little-endian groups for 3, 5 and 6 bits.
std::vector<int> tq_unpack_codes(int head_dim, int bits, const std::uint8_t* bytes);
// An f32 encoder's u differs from this oracle's by rounding: measured up to 1.7e-6 on N(0,1)
// and outlier rows of both D. Codes may differ by one where u is this close to a boundary.
inline constexpr double kTqBoundaryTolerance = 4e-6;

// Distance from u to the nearest decision boundary (midpoint of two neighbouring centroids):
// codes may legitimately differ by one where this is tiny.
double tq_boundary_distance(int bits, double u);

}  // namespace turbodecode::oracle
