// Double-precision merge of partial attentions over disjoint position sets (SPEC §2.5, §2.9,
// §2.10): the attention over the union weighs each part by its share of the total Σ exp(score),
// e^{lse_r − lse}, with lse = ln Σ_r e^{lse_r}. Parts with lse = −∞ saw nothing and are left
// out (their out is never read); when every part is empty, out is 0 and lse is −∞.
#pragma once

#include <cstdint>
#include <vector>

namespace turbodecode::oracle {

struct MergeResult {
  std::vector<double> out;  // [rows, D]
  std::vector<double> lse;  // [rows]
};

// parts_out [R, rows, D] and parts_lse [R, rows], contiguous (rows = n·n_heads for attention).
MergeResult merge_attention(const std::vector<float>& parts_out,
                            const std::vector<float>& parts_lse, std::int64_t parts,
                            std::int64_t rows, std::int64_t dim);

}  // namespace turbodecode::oracle
