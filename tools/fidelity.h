// Agreement of computed rows with reference rows: cosine similarity and relative L2 error per
// row (a row = one head's output, or one encoded vector), summarised over many rows.
#pragma once

#include <cstdint>
#include <limits>

namespace turbodecode::cli {

class Fidelity {
 public:
  // Adds `rows` rows of `dim` values; `reference` is the exact result. A row holding NaN or
  // Inf counts as cosine −1 and infinite error, so it can never look good.
  template <class Reference>
  void add_rows(const float* computed, const Reference* reference, std::int64_t rows, int dim);

  std::int64_t rows() const { return rows_; }
  double mean_cosine() const { return rows_ ? cosine_sum_ / static_cast<double>(rows_) : 0.0; }
  double min_cosine() const { return min_cosine_; }
  // max over rows of ‖computed − reference‖₂ / ‖reference‖₂
  double max_relative_error() const { return max_relative_error_; }
  // ‖computed − reference‖₂ / ‖reference‖₂ over all rows together
  double relative_l2() const;
  double max_abs_error() const { return max_abs_error_; }

 private:
  std::int64_t rows_ = 0;
  double cosine_sum_ = 0.0;
  double min_cosine_ = 1.0;
  double max_relative_error_ = 0.0;
  double max_abs_error_ = 0.0;
  double error_squares_ = 0.0;
  double reference_squares_ = 0.0;
};

}  // namespace turbodecode::cli
