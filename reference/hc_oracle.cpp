#include "reference/hc_oracle.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/f16.h"

namespace turbodecode::oracle {
namespace {

double sigmoid(double z) {
  return z >= 0.0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
}

// Divides each row (by_rows) or each column of the n×n matrix by its sum + ε.
void normalise(std::vector<double>& c, int n, bool by_rows, double eps) {
  for (int a = 0; a < n; ++a) {
    double sum = 0.0;
    for (int b = 0; b < n; ++b) sum += by_rows ? c[a * n + b] : c[b * n + a];
    for (int b = 0; b < n; ++b) (by_rows ? c[a * n + b] : c[b * n + a]) /= sum + eps;
  }
}

}  // namespace

std::vector<double> hc_split(std::span<const double> mix, std::span<const double> scale,
                             std::span<const double> base, int n_hc, int iters, double eps) {
  const int n = n_hc;
  std::vector<double> out(static_cast<std::size_t>(2 * n + n * n));
  for (int h = 0; h < n; ++h) {
    out[h] = sigmoid(mix[h] * scale[0] + base[h]) + eps;
    out[n + h] = 2.0 * sigmoid(mix[n + h] * scale[1] + base[n + h]);
  }
  std::vector<double> c(static_cast<std::size_t>(n * n));
  for (int r = 0; r < n; ++r) {
    double row_max = -std::numeric_limits<double>::infinity();
    for (int k = 0; k < n; ++k) {
      c[r * n + k] = mix[2 * n + r * n + k] * scale[2] + base[2 * n + r * n + k];
      row_max = std::max(row_max, c[r * n + k]);
    }
    double sum = 0.0;
    for (int k = 0; k < n; ++k) sum += c[r * n + k] = std::exp(c[r * n + k] - row_max);
    for (int k = 0; k < n; ++k) c[r * n + k] = c[r * n + k] / sum + eps;
  }
  normalise(c, n, false, eps);
  for (int it = 1; it < iters; ++it) {
    normalise(c, n, true, eps);
    normalise(c, n, false, eps);
  }
  std::copy(c.begin(), c.end(), out.begin() + 2 * n);
  return out;
}

std::vector<double> hc_collapse(std::span<const double> x, std::span<const double> pre, int n_hc,
                                std::int64_t embd) {
  std::vector<double> u(static_cast<std::size_t>(embd), 0.0);
  for (int h = 0; h < n_hc; ++h) {
    for (std::int64_t d = 0; d < embd; ++d) u[d] += pre[h] * x[h * embd + d];
  }
  return u;
}

std::vector<double> hc_rms_norm(std::span<const double> u, std::span<const double> weight,
                                double eps) {
  double sum = 0.0;
  for (double v : u) sum += v * v;
  const double scale = 1.0 / std::sqrt(sum / static_cast<double>(u.size()) + eps);
  std::vector<double> out(u.size());
  for (std::size_t d = 0; d < u.size(); ++d) out[d] = u[d] * scale * weight[d];
  return out;
}

std::vector<double> hc_expand(std::span<const double> block, std::span<const double> add,
                              std::span<const double> x, std::span<const double> post,
                              std::span<const double> comb, int n_hc, std::int64_t embd) {
  std::vector<double> out(static_cast<std::size_t>(n_hc * embd));
  for (int c = 0; c < n_hc; ++c) {
    for (std::int64_t d = 0; d < embd; ++d) {
      double acc = (block[d] + (add.empty() ? 0.0 : add[d])) * post[c];
      for (int r = 0; r < n_hc; ++r) acc += comb[r * n_hc + c] * x[r * embd + d];
      out[c * embd + d] = acc;
    }
  }
  return out;
}

std::vector<double> hc_norm_mix(std::span<const double> x, std::span<const double> weight,
                                int mix_width, double eps) {
  double sum = 0.0;
  for (double v : x) sum += v * v;
  const double rho = 1.0 / std::sqrt(sum / static_cast<double>(x.size()) + eps);
  std::vector<double> out(static_cast<std::size_t>(mix_width), 0.0);
  for (int k = 0; k < mix_width; ++k) {
    for (std::size_t i = 0; i < x.size(); ++i) out[k] += weight[k * x.size() + i] * (x[i] * rho);
  }
  return out;
}

std::vector<double> hc_head_weights(std::span<const double> logits, double scale,
                                    std::span<const double> base, double post_scale, double eps) {
  std::vector<double> out(logits.size());
  for (std::size_t h = 0; h < logits.size(); ++h) {
    out[h] = post_scale * sigmoid(logits[h] * scale + base[h]) + eps;
  }
  return out;
}

std::vector<double> q8_dequantize(const std::uint8_t* weight, std::int64_t rows, std::int64_t cols,
                                  std::int64_t row_stride_bytes) {
  std::vector<double> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t b = 0; b < cols / 32; ++b) {
      const std::uint8_t* block = weight + r * row_stride_bytes + b * 34;
      std::uint16_t d_bits;
      std::memcpy(&d_bits, block, sizeof d_bits);
      const double d = f16_to_f32(d_bits);
      for (int j = 0; j < 32; ++j) {
        out[r * cols + b * 32 + j] = d * static_cast<std::int8_t>(block[2 + j]);
      }
    }
  }
  return out;
}

std::vector<double> matvec(std::span<const double> weight, std::span<const double> x,
                           std::int64_t rows, std::int64_t cols) {
  std::vector<double> out(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < cols; ++j) out[r] += weight[r * cols + j] * x[j];
  }
  return out;
}

}  // namespace turbodecode::oracle
