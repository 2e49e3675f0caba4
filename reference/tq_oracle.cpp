#include "tq_oracle.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "tq/tables.h"

namespace turbodecode::oracle {

namespace {

constexpr double kZeroNorm = 1e-10;  // SPEC §1.2: a norm at or below this scales by 0

double sign_of(int j) {
  return ((tq::kSignMask[j / 8] >> (j % 8)) & 1) ? -1.0 : 1.0;
}

// Entry (i, k) of the natural-order Sylvester Hadamard matrix.
double hadamard(int i, int k) {
  return (std::popcount(static_cast<unsigned>(i & k)) % 2) ? -1.0 : 1.0;
}

std::vector<double> hadamard_times(int d, std::span<const double> v) {
  std::vector<double> out(static_cast<std::size_t>(d), 0.0);
  for (int i = 0; i < d; ++i) {
    double sum = 0.0;
    for (int k = 0; k < d; ++k) sum += hadamard(i, k) * v[k];
    out[i] = sum;
  }
  return out;
}

// Index of the nearest centroid; the first (lower) one wins a tie.
int nearest_centroid(int bits, double u) {
  const auto book = tq::codebook(bits);
  int best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int i = 0; i < static_cast<int>(book.size()); ++i) {
    const double distance = std::abs(u - static_cast<double>(book[i]));
    if (distance < best_distance) {
      best_distance = distance;
      best = i;
    }
  }
  return best;
}

}  // namespace

std::vector<double> tq_rotate(int head_dim, std::span<const double> x) {
  std::vector<double> signed_x(static_cast<std::size_t>(head_dim));
  for (int j = 0; j < head_dim; ++j) signed_x[j] = sign_of(j) * x[j];
  std::vector<double> y = hadamard_times(head_dim, signed_x);
  for (double& v : y) v /= std::sqrt(static_cast<double>(head_dim));
  return y;
}

std::vector<double> tq_unrotate(int head_dim, std::span<const double> y) {
  std::vector<double> x = hadamard_times(head_dim, y);
  for (int j = 0; j < head_dim; ++j) x[j] = sign_of(j) * x[j] / std::sqrt(double(head_dim));
  return x;
}

TqEncodedRow tq_encode(int head_dim, int bits, double scale_factor_d512,
                       std::span<const double> x) {
  const std::vector<double> y = tq_rotate(head_dim, x);
  TqEncodedRow row;
  row.scaled.resize(y.size());
  // D = 256: one L2 norm, u = y·16/n. D = 512: per half the RMS n_b, u = y·sf/n_b.
  const int group = 256;  // the whole row for D = 256, each half for D = 512
  for (int begin = 0; begin < head_dim; begin += group) {
    double sum_squares = 0.0;
    for (int j = begin; j < begin + group; ++j) sum_squares += y[j] * y[j];
    const double norm = head_dim == 256 ? std::sqrt(sum_squares) : std::sqrt(sum_squares / group);
    const double numerator = head_dim == 256 ? 16.0 : scale_factor_d512;
    const double scale = norm > kZeroNorm ? numerator / norm : 0.0;
    row.norms.push_back(norm);
    for (int j = begin; j < begin + group; ++j) row.scaled[j] = y[j] * scale;
  }
  for (double u : row.scaled) row.codes.push_back(nearest_centroid(bits, u));
  return row;
}

std::vector<double> tq_decode(int head_dim, int bits, double scale_factor_d512,
                              std::span<const int> codes, std::span<const double> norms) {
  const auto book = tq::codebook(bits);
  std::vector<double> y(static_cast<std::size_t>(head_dim));
  for (int j = 0; j < head_dim; ++j) {
    const double c = book[codes[j]];
    y[j] = head_dim == 256 ? c * norms[0] / 16.0 : c * norms[j / 256] / scale_factor_d512;
  }
  return y;
}

std::vector<int> tq_unpack_codes(int head_dim, int bits, const std::uint8_t* bytes) {
  std::vector<int> codes(static_cast<std::size_t>(head_dim));
  if (bits == 8) {
    for (int j = 0; j < head_dim; ++j) codes[j] = bytes[j];
    return codes;
  }
  if (bits == 4) {
    for (int j = 0; j < head_dim; ++j)
      codes[j] = j % 2 == 0 ? bytes[j / 2] % 16 : bytes[j / 2] / 16;
    return codes;
  }
  // SPEC §1.5: a group of g codes fills n bytes, read as one little-endian integer; code i of
  // the group is its bits [b·i, b·i + b).
  const int group_codes = bits == 6 ? 4 : 8;
  const int group_bytes = bits * group_codes / 8;
  for (int group = 0; group < head_dim / group_codes; ++group) {
    std::uint64_t value = 0;
    for (int k = 0; k < group_bytes; ++k) {
      value += static_cast<std::uint64_t>(bytes[group * group_bytes + k]) << (8 * k);
    }
    for (int i = 0; i < group_codes; ++i) {
      codes[group * group_codes + i] = static_cast<int>((value >> (bits * i)) % (1u << bits));
    }
  }
  return codes;
}

double tq_boundary_distance(int bits, double u) {
  const auto book = tq::codebook(bits);
  double nearest = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i + 1 < book.size(); ++i) {
    const double midpoint = (static_cast<double>(book[i]) + book[i + 1]) / 2.0;
    nearest = std::min(nearest, std::abs(u - midpoint));
  }
  return nearest;
}

}  // namespace turbodecode::oracle
