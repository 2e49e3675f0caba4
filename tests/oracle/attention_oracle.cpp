// Reference decode attention. The math, once (SPEC §2.2-2.4): for a query at position sp,
//   s_p = scale · dot(q, k_p)  (TQ K: dot(R_D q, k̂_p), k̂ the decoded rotated row),
//   s_p ← softcap · tanh(s_p / softcap) when softcap > 0,
//   o   = Σ_p softmax(s)_p · v_p over the visible rows p  (TQ V: v̂_p, rotated basis),
// then o ← R_D⁻¹(o) for TQ V unless the rotated result is asked for. No visible row: o = 0.
#include "oracle/attention_oracle.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <stdexcept>

#include "oracle/tq_oracle.h"

namespace turbodecode::oracle {
namespace {

using Row = std::vector<double>;

double resolved_scale(double scale, int head_dim) {
  return scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : scale;
}

double capped(double score, double softcap) {
  return softcap > 0.0 ? softcap * std::tanh(score / softcap) : score;
}

double half_to_double(std::uint16_t bits) {
  _Float16 h;
  static_assert(sizeof h == sizeof bits);
  std::memcpy(&h, &bits, sizeof h);
  return static_cast<double>(h);
}

// One stored row (K or V) of the cache as doubles: F16 widened, TQ decoded (rotated basis).
Row stored_row(const KvCacheConfig& c, RowFormat format, const TensorView& rows,
               const TensorView& norms, std::int64_t slot, std::int64_t head, std::int64_t row) {
  const int dim = c.head_dim;
  const std::int64_t offset =
      slot * rows.strides[0] + head * rows.strides[1] + row * rows.strides[2];
  if (format == RowFormat::f16) {
    const auto* half = rows.as<const std::uint16_t>() + offset;
    Row values(static_cast<std::size_t>(dim));
    for (int j = 0; j < dim; ++j) values[static_cast<std::size_t>(j)] = half_to_double(half[j]);
    return values;
  }
  const int bits = format_bits(format);
  const std::vector<int> codes = tq_unpack_codes(dim, bits, rows.as<const std::uint8_t>() + offset);
  for (int code : codes) {
    if (code >= (1 << bits)) throw std::runtime_error("oracle: code out of the codebook's range");
  }
  const float* norm = norms.as<const float>() + slot * norms.strides[0] + head * norms.strides[1] +
                      row * norms.strides[2];
  const std::vector<double> row_norms(norm, norm + norms_per_row(dim));
  return tq_decode(dim, bits, c.scale_factor_d512, codes, row_norms);
}

// The cache rows a query at `seq_pos` sees, from SPEC §2.2 as written: scan every row, give
// it its logical index, and keep it unless it is masked.
std::vector<std::int64_t> visible_rows(const KvCacheConfig& c, const DecodeOptions& options,
                                       std::int64_t seq_pos) {
  const bool ring = options.mask == MaskKind::sliding_ring;
  const std::int64_t len = ring ? std::min(seq_pos + 1, c.capacity) : seq_pos + 1;
  const std::int64_t ring_start =
      ring && seq_pos + 1 >= c.capacity ? (seq_pos + 1) % c.capacity : 0;
  const std::int64_t window = options.mask == MaskKind::causal ? 0 : options.sliding_window;
  std::vector<std::int64_t> rows;
  for (std::int64_t p = 0; p < std::min(len, c.capacity); ++p) {
    const std::int64_t logical = ring ? (p - ring_start + c.capacity) % c.capacity : p;
    if (logical >= len) continue;
    if (window > 0 && len > window && logical < len - window) continue;
    rows.push_back(p);
  }
  return rows;
}

// softmax(scores)-weighted sum of rows; zeros when there are none.
Row weighted_sum(const std::vector<double>& scores, const std::vector<Row>& values, int dim) {
  Row out(static_cast<std::size_t>(dim), 0.0);
  if (scores.empty()) return out;
  const double max = *std::max_element(scores.begin(), scores.end());
  double total = 0.0;
  for (std::size_t p = 0; p < scores.size(); ++p) {
    const double weight = std::exp(scores[p] - max);
    total += weight;
    for (int j = 0; j < dim; ++j)
      out[static_cast<std::size_t>(j)] += weight * values[p][static_cast<std::size_t>(j)];
  }
  for (double& x : out) x /= total;
  return out;
}

double dot(const Row& a, const Row& b) {
  double sum = 0.0;
  for (std::size_t j = 0; j < a.size(); ++j) sum += a[j] * b[j];
  return sum;
}

}  // namespace

std::vector<double> decode_attention(const KvCacheView& cache, const DecodeOptions& options,
                                     const std::vector<float>& q,
                                     const std::vector<std::int32_t>& slot_ids,
                                     const std::vector<std::int32_t>& seq_pos) {
  const KvCacheConfig& c = cache.config;
  const int dim = c.head_dim;
  const int heads = options.n_heads;
  const int group = heads / c.n_kv_heads;
  const double scale = resolved_scale(options.scale, dim);
  const bool tq_k = is_quantized(c.k_format);
  const bool unrotate_output = is_quantized(c.v_format) && !options.rotated_output;
  std::vector<double> out;
  out.reserve(slot_ids.size() * static_cast<std::size_t>(heads * dim));
  for (std::size_t i = 0; i < slot_ids.size(); ++i) {
    const std::vector<std::int64_t> rows = visible_rows(c, options, seq_pos[i]);
    for (int kv = 0; kv < c.n_kv_heads; ++kv) {
      std::vector<Row> keys, values;
      for (std::int64_t p : rows) {
        keys.push_back(stored_row(c, c.k_format, cache.k, cache.k_norms, slot_ids[i], kv, p));
        values.push_back(stored_row(c, c.v_format, cache.v, cache.v_norms, slot_ids[i], kv, p));
      }
      for (int h = kv * group; h < (kv + 1) * group; ++h) {
        const float* qh =
            q.data() + (i * static_cast<std::size_t>(heads) + static_cast<std::size_t>(h)) *
                           static_cast<std::size_t>(dim);
        Row query(qh, qh + dim);
        if (tq_k) query = tq_rotate(dim, query);
        std::vector<double> scores;
        for (const Row& k : keys) scores.push_back(capped(scale * dot(query, k), options.softcap));
        Row o = weighted_sum(scores, values, dim);
        if (unrotate_output) o = tq_unrotate(dim, o);
        out.insert(out.end(), o.begin(), o.end());
      }
    }
  }
  return out;
}

std::vector<double> exact_attention(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int n_heads, int n_kv_heads,
                                    int head_dim, double scale, double softcap) {
  const auto dim = static_cast<std::size_t>(head_dim);
  const std::size_t positions = k.size() / (static_cast<std::size_t>(n_kv_heads) * dim);
  const int group = n_heads / n_kv_heads;
  scale = resolved_scale(scale, head_dim);
  std::vector<double> out;
  for (int h = 0; h < n_heads; ++h) {
    const std::size_t kv = static_cast<std::size_t>(h / group);
    const Row query(q.begin() + static_cast<std::ptrdiff_t>(h * dim),
                    q.begin() + static_cast<std::ptrdiff_t>((h + 1) * dim));
    std::vector<double> scores;
    std::vector<Row> values;
    for (std::size_t p = 0; p < positions; ++p) {
      const std::size_t at = (p * static_cast<std::size_t>(n_kv_heads) + kv) * dim;
      const Row key(k.begin() + static_cast<std::ptrdiff_t>(at),
                    k.begin() + static_cast<std::ptrdiff_t>(at + dim));
      scores.push_back(capped(scale * dot(query, key), softcap));
      values.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(at),
                          v.begin() + static_cast<std::ptrdiff_t>(at + dim));
    }
    const Row o = weighted_sum(scores, values, head_dim);
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

}  // namespace turbodecode::oracle
