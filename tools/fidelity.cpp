#include "fidelity.h"

#include <algorithm>
#include <cmath>

namespace turbodecode::cli {

template <class Reference>
void Fidelity::add_rows(const float* computed, const Reference* reference, std::int64_t rows,
                        int dim) {
  for (std::int64_t r = 0; r < rows; ++r) {
    double dot = 0.0, computed_sq = 0.0, reference_sq = 0.0, error_sq = 0.0;
    for (int i = 0; i < dim; ++i) {
      const double a = computed[r * dim + i];
      const double b = static_cast<double>(reference[r * dim + i]);
      dot += a * b;
      computed_sq += a * a;
      reference_sq += b * b;
      error_sq += (a - b) * (a - b);
      max_abs_error_ = std::max(max_abs_error_, std::abs(a - b));
    }
    double cosine = 1.0;
    if (computed_sq > 0.0 || reference_sq > 0.0)
      cosine = dot / std::sqrt(computed_sq * reference_sq);
    double relative_error =
        reference_sq > 0.0 ? std::sqrt(error_sq / reference_sq) : (error_sq > 0.0 ? INFINITY : 0.0);
    if (!std::isfinite(error_sq)) {
      cosine = -1.0;
      relative_error = INFINITY;
      max_abs_error_ = INFINITY;
    }
    cosine_sum_ += cosine;
    min_cosine_ = std::min(min_cosine_, cosine);
    max_relative_error_ = std::max(max_relative_error_, relative_error);
    error_squares_ += error_sq;
    reference_squares_ += reference_sq;
    ++rows_;
  }
}

double Fidelity::relative_l2() const {
  if (reference_squares_ == 0.0) return error_squares_ == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(error_squares_ / reference_squares_);
}

template void Fidelity::add_rows<float>(const float*, const float*, std::int64_t, int);
template void Fidelity::add_rows<double>(const float*, const double*, std::int64_t, int);

}  // namespace turbodecode::cli
