// Synthetic keys, values and queries with the structure that makes KV-cache quantization hard
// in real models: per-channel scales with a few outlier channels 10-50x larger, smooth drift
// along the sequence, and noise correlated from one token to the next.
#pragma once

#include <cstdint>
#include <vector>

namespace turbodecode::cli {

// One layer's K or V rows, [positions, n_kv_heads, head_dim] f32, generated as
//   row[p][h][c] = scale[h][c] · (offset[h][c] + amplitude[h][c] · sin(ω[h][c]·p + φ[h][c])
//                                  + noise[h][c](p)),
// noise an AR(1) process of unit variance (correlation kNoiseCorrelation between tokens).
class SyntheticRows {
 public:
  SyntheticRows(int n_kv_heads, int head_dim, std::int64_t positions, std::uint64_t seed);

  int n_kv_heads() const { return n_kv_heads_; }
  int head_dim() const { return head_dim_; }
  std::int64_t positions() const { return positions_; }
  const std::vector<float>& rows() const { return rows_; }
  // Values of position p, [n_kv_heads, head_dim].
  const float* row(std::int64_t p) const;
  float channel_scale(int head, int channel) const;

 private:
  void generate_head(int head, std::uint64_t seed);

  int n_kv_heads_;
  int head_dim_;
  std::int64_t positions_;
  std::vector<float> scales_;  // [n_kv_heads, head_dim]
  std::vector<float> rows_;
};

// Queries [n_heads, head_dim] for the token at position p: each query head leans towards the
// current key of its KV head (so recent, similar positions score higher, as in real decoding)
// and is divided by the key channel scales, as QK-normalised models keep logits O(1).
std::vector<float> synthetic_query(const SyntheticRows& keys, int n_heads, std::int64_t p,
                                   std::uint64_t seed);

}  // namespace turbodecode::cli
