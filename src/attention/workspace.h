// Layout of the CPU backend's decode workspace (the `workspace` argument of run_decode).
// Three f32 regions, each 64-byte aligned so rows start on cache lines:
//   rotated_q [max_queries, n_heads, D]             R_D(q), only when K is TurboQuant (§2.4)
//   states    [max_queries, n_heads, max_chunks]    (m, l) of each chunk of a row (chunks.h)
//   partial_o [max_queries, n_heads, max_chunks, D] O of each chunk (unnormalised)
#pragma once

#include <cstdint>

#include "attention/state.h"
#include "turbodecode/attention.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::attention {

class CpuWorkspaceLayout {
 public:
  explicit CpuWorkspaceLayout(const DecodePlan& plan)
      : head_dim_(plan.cache.head_dim),
        n_heads_(plan.options.n_heads),
        max_chunks_(plan.max_chunks),
        rows_(plan.max_queries * plan.options.n_heads) {
    const bool rotate_q = is_turboquant(plan.cache.k_format);
    rotated_q_bytes_ = rotate_q ? aligned(rows_ * head_dim_ * kF32Bytes) : 0;
    states_bytes_ = aligned(rows_ * max_chunks_ * static_cast<std::int64_t>(sizeof(SoftmaxState)));
    partial_o_bytes_ = aligned(rows_ * max_chunks_ * head_dim_ * kF32Bytes);
  }

  std::int64_t bytes() const { return rotated_q_bytes_ + states_bytes_ + partial_o_bytes_; }

  // Views of the regions inside a workspace that starts at `base`.
  float* rotated_q(void* base, std::int64_t query, int head) const {
    return reinterpret_cast<float*>(base) + (query * n_heads_ + head) * head_dim_;
  }
  SoftmaxState* states(void* base, std::int64_t query, int head) const {
    return reinterpret_cast<SoftmaxState*>(static_cast<char*>(base) + rotated_q_bytes_) +
           (query * n_heads_ + head) * max_chunks_;
  }
  float* partial_o(void* base, std::int64_t query, int head, int chunk) const {
    char* region = static_cast<char*>(base) + rotated_q_bytes_ + states_bytes_;
    return reinterpret_cast<float*>(region) +
           ((query * n_heads_ + head) * max_chunks_ + chunk) * head_dim_;
  }

 private:
  static constexpr std::int64_t kF32Bytes = 4;
  static std::int64_t aligned(std::int64_t bytes) { return (bytes + 63) / 64 * 64; }

  std::int64_t head_dim_;
  std::int64_t n_heads_;
  std::int64_t max_chunks_;
  std::int64_t rows_;
  std::int64_t rotated_q_bytes_ = 0;
  std::int64_t states_bytes_ = 0;
  std::int64_t partial_o_bytes_ = 0;
};

}  // namespace turbodecode::attention
