#include "reference/merge_oracle.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace turbodecode::oracle {

MergeResult merge_attention(const std::vector<float>& parts_out,
                            const std::vector<float>& parts_lse, std::int64_t parts,
                            std::int64_t rows, std::int64_t dim) {
  constexpr double kEmpty = -std::numeric_limits<double>::infinity();
  MergeResult result{std::vector<double>(static_cast<std::size_t>(rows * dim), 0.0),
                     std::vector<double>(static_cast<std::size_t>(rows), kEmpty)};
  for (std::int64_t row = 0; row < rows; ++row) {
    auto part_lse = [&](std::int64_t r) {
      return static_cast<double>(parts_lse[static_cast<std::size_t>(r * rows + row)]);
    };
    double max_lse = kEmpty;
    for (std::int64_t r = 0; r < parts; ++r) max_lse = std::max(max_lse, part_lse(r));
    if (max_lse == kEmpty) continue;
    double total = 0.0;
    for (std::int64_t r = 0; r < parts; ++r) total += std::exp(part_lse(r) - max_lse);
    const double lse = max_lse + std::log(total);
    result.lse[static_cast<std::size_t>(row)] = lse;
    for (std::int64_t r = 0; r < parts; ++r) {
      if (part_lse(r) == kEmpty) continue;
      const double share = std::exp(part_lse(r) - lse);
      const float* o = parts_out.data() + (r * rows + row) * dim;
      for (std::int64_t d = 0; d < dim; ++d) {
        result.out[static_cast<std::size_t>(row * dim + d)] += share * o[d];
      }
    }
  }
  return result;
}

}  // namespace turbodecode::oracle
