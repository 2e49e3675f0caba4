// The raw arguments of merge_attention, built by validate_merge and consumed by both backends,
// and the per-(row, head) merge totals they share. Strides count elements.
#pragma once

#include <cmath>
#include <cstdint>

#include "attention/state.h"
#include "common/host_device.h"

namespace turbodecode::shard {

struct MergeArgs {
  std::int64_t parts = 0;  // R
  std::int64_t rows = 0;   // n
  std::int64_t heads = 0;
  std::int64_t dim = 0;  // D
  const float* parts_out = nullptr;
  std::int64_t parts_out_strides[3] = {};  // part, row, head; D is contiguous
  const float* parts_lse = nullptr;
  std::int64_t parts_lse_strides[3] = {};  // part, row, head
  float* out = nullptr;
  std::int64_t out_strides[2] = {};  // row, head; D is contiguous
  float* lse = nullptr;              // nullptr: not written
  std::int64_t lse_strides[2] = {};  // row, head

  TD_HOST_DEVICE const float* part_out(std::int64_t r, std::int64_t row, std::int64_t head) const {
    return parts_out + r * parts_out_strides[0] + row * parts_out_strides[1] +
           head * parts_out_strides[2];
  }
  TD_HOST_DEVICE float part_lse(std::int64_t r, std::int64_t row, std::int64_t head) const {
    return parts_lse[r * parts_lse_strides[0] + row * parts_lse_strides[1] +
                     head * parts_lse_strides[2]];
  }
  TD_HOST_DEVICE float* out_row(std::int64_t row, std::int64_t head) const {
    return out + row * out_strides[0] + head * out_strides[1];
  }
  TD_HOST_DEVICE float* lse_at(std::int64_t row, std::int64_t head) const {
    return lse + row * lse_strides[0] + head * lse_strides[1];
  }
};

// The merge of one (row, head) over the parts (SPEC §2.5 with l_j = e^{lse_j − m_j}): the
// largest lse and the total weight Σ_r e^{lse_r − max}, summed in part order.
struct MergeTotals {
  float max_lse;
  float weight_sum;
};

TD_HOST_DEVICE MergeTotals merge_totals(const MergeArgs& args, std::int64_t row,
                                        std::int64_t head) {
  float max_lse = -INFINITY;
  for (std::int64_t r = 0; r < args.parts; ++r) {
    max_lse = fmaxf(max_lse, args.part_lse(r, row, head));
  }
  float weight_sum = 0.0f;
  for (std::int64_t r = 0; r < args.parts; ++r) {
    weight_sum += attention::merge_weight(args.part_lse(r, row, head), max_lse);
  }
  return {max_lse, weight_sum};
}

// ln of the merged Σ exp(score): −inf when no part saw anything.
TD_HOST_DEVICE float merged_lse(MergeTotals totals) {
  return totals.weight_sum > 0.0f ? totals.max_lse + logf(totals.weight_sum) : -INFINITY;
}

// Element d of the merged output: Σ_r w_r·o_r[d] / Σ_r w_r over the parts that saw something
// (the others are skipped, so whatever their out holds never reaches the result).
TD_HOST_DEVICE float merged_element(const MergeArgs& args, MergeTotals totals, std::int64_t row,
                                    std::int64_t head, std::int64_t d) {
  float sum = 0.0f;
  for (std::int64_t r = 0; r < args.parts; ++r) {
    const float part_lse = args.part_lse(r, row, head);
    if (part_lse == -INFINITY) continue;
    sum += attention::merge_weight(part_lse, totals.max_lse) * args.part_out(r, row, head)[d];
  }
  return sum * attention::output_scale(totals.weight_sum);
}

}  // namespace turbodecode::shard
