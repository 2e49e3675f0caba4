// Double-precision references of the mHC operators (SPEC §3) and the Q8_0 matvec (SPEC §1.4).
// One token row at a time; every array is contiguous, states stream-major ([h][d]).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace turbodecode::oracle {

// §3.1 split: pre_h = σ(m_h·s0 + β_h) + ε; post_h = 2σ(m_{n+h}·s1 + β_{n+h});
// comb: z = m·s2 + β, row softmax, + ε, one column normalisation, then iters − 1 rounds of
// {row, column} normalisation, each line divided by (its sum + ε). Returns M values.
std::vector<double> hc_split(std::span<const double> mix, std::span<const double> scale,
                             std::span<const double> base, int n_hc, int iters, double eps);

// §3.2 collapse: u_d = Σ_h pre_h·x_{h,d}.
std::vector<double> hc_collapse(std::span<const double> x, std::span<const double> pre, int n_hc,
                                std::int64_t embd);

// Weighted RMSNorm: u_d / sqrt(mean(u²) + ε)·w_d.
std::vector<double> hc_rms_norm(std::span<const double> u, std::span<const double> weight,
                                double eps);

// §3.3 expand: X'_{c,d} = (block_d + add_d)·post_c + Σ_r comb_{r,c}·X_{r,d}; add may be empty;
// comb row-major [r][c].
std::vector<double> hc_expand(std::span<const double> block, std::span<const double> add,
                              std::span<const double> x, std::span<const double> post,
                              std::span<const double> comb, int n_hc, std::int64_t embd);

// §3.2 norm-mix: ρ = 1/sqrt(mean(x²) + ε) over all n·E values, m_k = Σ_i W_{k,i}·x_i·ρ;
// weight [M][n·E] (already widened from F16).
std::vector<double> hc_norm_mix(std::span<const double> x, std::span<const double> weight,
                                int mix_width, double eps);

// §3.5 output-head weights: w_h = post_scale·σ(p_h·s0 + β_h) + ε.
std::vector<double> hc_head_weights(std::span<const double> logits, double scale,
                                    std::span<const double> base, double post_scale, double eps);

// §1.4: dequantized Q8_0 rows [rows][cols] (d·q).
std::vector<double> q8_dequantize(const std::uint8_t* weight, std::int64_t rows, std::int64_t cols,
                                  std::int64_t row_stride_bytes);

// y_r = Σ_j W_{r,j}·x_j for a dequantized W [rows][cols].
std::vector<double> matvec(std::span<const double> weight, std::span<const double> x,
                           std::int64_t rows, std::int64_t cols);

}  // namespace turbodecode::oracle
