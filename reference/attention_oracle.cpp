// Reference decode attention. The math, once (SPEC §2.2-2.4, §2.8, §2.9): for a query row at
// position sp,
//   s_p = scale · dot(q, k_p)  (TQ K: dot(R_D q, k̂_p), k̂ the decoded rotated row; FP8 and F16
//                               K: the decoded row itself),
//   s_p ← softcap · tanh(s_p / softcap) when softcap > 0,
//   o   = Σ_p softmax(s)_p · v_p over the visible rows p  (TQ V: v̂_p, rotated basis),
//   lse = ln Σ_p exp(s_p)  (−∞ with no visible row),
// then o ← R_D⁻¹(o) for TQ V unless the rotated result is asked for. No visible row: o = 0.
// Rows of a query run (several tokens of one slot) are each evaluated alone: a row at sp sees
// what a single query at sp sees, since the run's later tokens only overwrite ring rows its
// window excludes (capacity >= window + run length − 1).
#include "reference/attention_oracle.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "reference/fp8_oracle.h"
#include "turbodecode/f16.h"
#include "reference/tq_oracle.h"

namespace turbodecode::oracle {
namespace {

using Row = std::vector<double>;

double resolved_scale(double scale, int head_dim) {
  return scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : scale;
}

double capped(double score, double softcap) {
  return softcap > 0.0 ? softcap * std::tanh(score / softcap) : score;
}

// Where a logical row of a slot is stored (SPEC §1.7): row `logical` of the slot's region, or
// row logical mod P of page block_table[slot][logical / P].
struct StoredAt {
  std::int64_t block, row;
};

StoredAt stored_at(const KvCacheView& cache, std::int64_t slot, std::int64_t logical) {
  const KvCacheConfig& c = cache.config;
  if (c.page_size == 0) return {slot, logical};
  const TensorView& table = cache.block_table;
  const std::int64_t page =
      table.as<const std::int32_t>()[slot * table.strides[0] +
                                     logical / c.page_size * table.strides[1]];
  if (page < 0 || page >= c.pages) throw std::runtime_error("oracle: block table names no page");
  return {page, logical % c.page_size};
}

// One stored row (K or V) of the cache as doubles: F16 widened, FP8 decoded (x̂), TQ decoded
// (rotated basis).
Row stored_row(const KvCacheConfig& c, RowFormat format, const TensorView& rows,
               const TensorView& norms, std::int64_t head, const StoredAt& at) {
  const int dim = c.head_dim;
  const std::int64_t offset =
      at.block * rows.strides[0] + head * rows.strides[1] + at.row * rows.strides[2];
  if (format == RowFormat::f16) {
    const auto* half = rows.as<const std::uint16_t>() + offset;
    Row values(static_cast<std::size_t>(dim));
    for (int j = 0; j < dim; ++j) values[static_cast<std::size_t>(j)] = f16_to_f32(half[j]);
    return values;
  }
  const std::uint8_t* bytes = rows.as<const std::uint8_t>() + offset;
  const float* side = norms.as<const float>() + at.block * norms.strides[0] +
                      head * norms.strides[1] + at.row * norms.strides[2];
  if (format == RowFormat::fp8) {
    const std::vector<int> codes(bytes, bytes + dim);
    return fp8_decode(codes, side[0]);
  }
  const int bits = format_bits(format);
  const std::vector<int> codes = tq_unpack_codes(dim, bits, bytes);
  for (int code : codes) {
    if (code >= (1 << bits)) throw std::runtime_error("oracle: code out of the codebook's range");
  }
  const std::vector<double> row_norms(side, side + norms_per_row(dim));
  return tq_decode(dim, bits, c.scale_factor_d512, codes, row_norms);
}

// The rows of its slot (logical rows, SPEC §1.7) a query at `seq_pos` sees, from SPEC §2.2 as
// written: scan every row, give it its logical index, and keep it unless it is masked.
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

// The query heads that share one KV head, stored [D, heads rounded up to kHeadBlock] with zero
// padding, so their dot products with one row advance side by side in registers rather than
// one latency-bound chain after another. Each head's sum still runs over j in order, in double.
class QueryGroup {
 public:
  static constexpr std::size_t kHeadBlock = 8;

  QueryGroup(std::size_t heads, std::size_t dim)
      : heads_(heads),
        dim_(dim),
        stride_((heads + kHeadBlock - 1) / kHeadBlock * kHeadBlock),
        by_dim_(dim * stride_, 0.0) {}

  std::size_t heads() const { return heads_; }
  std::size_t dim() const { return dim_; }

  template <class Value>
  void set(std::size_t head, const Value* values) {
    for (std::size_t j = 0; j < dim_; ++j) by_dim_[j * stride_ + head] = values[j];
  }

  // dots[h] = dot(query h, row) for every head.
  template <class Value>
  void dots(const Value* row, double* dots) const {
    for (std::size_t block = 0; block < stride_; block += kHeadBlock) {
      std::array<double, kHeadBlock> sums{};
      const double* q = by_dim_.data() + block;
      for (std::size_t j = 0; j < dim_; ++j, q += stride_) {
        const auto x = static_cast<double>(row[j]);
        for (std::size_t h = 0; h < kHeadBlock; ++h) sums[h] += q[h] * x;
      }
      std::copy_n(sums.begin(), std::min(kHeadBlock, heads_ - block), dots + block);
    }
  }

 private:
  std::size_t heads_, dim_, stride_;
  std::vector<double> by_dim_;
};

// Attention of a query group over `rows` rows, all visible; key_at(p) and value_at(p) point at
// row p's values. Returns out [heads, D], each head's softmax-weighted sum of the value rows
// (zeros when there are no rows), and lse [heads]. Each row is read once for all heads, in
// place.
template <class KeyAt, class ValueAt>
DecodeResult attend(const QueryGroup& queries, std::size_t rows, KeyAt key_at, ValueAt value_at,
                    double scale, double softcap) {
  const std::size_t heads = queries.heads(), dim = queries.dim();
  std::vector<double> dots(heads), scores(heads * rows);  // scores [heads, rows]
  for (std::size_t p = 0; p < rows; ++p) {
    queries.dots(key_at(p), dots.data());
    for (std::size_t h = 0; h < heads; ++h) scores[h * rows + p] = capped(scale * dots[h], softcap);
  }
  DecodeResult result{std::vector<double>(heads * dim, 0.0),
                      std::vector<double>(heads, -std::numeric_limits<double>::infinity())};
  std::vector<double>& out = result.out;
  if (rows == 0) return result;
  std::vector<double> max(heads), total(heads, 0.0);
  for (std::size_t h = 0; h < heads; ++h) {
    const auto head_scores = scores.begin() + static_cast<std::ptrdiff_t>(h * rows);
    max[h] = *std::max_element(head_scores, head_scores + static_cast<std::ptrdiff_t>(rows));
  }
  for (std::size_t p = 0; p < rows; ++p) {
    const auto* value = value_at(p);
    for (std::size_t h = 0; h < heads; ++h) {
      const double weight = std::exp(scores[h * rows + p] - max[h]);
      total[h] += weight;
      double* o = out.data() + h * dim;
      for (std::size_t j = 0; j < dim; ++j) o[j] += weight * static_cast<double>(value[j]);
    }
  }
  for (std::size_t h = 0; h < heads; ++h) {
    for (std::size_t j = 0; j < dim; ++j) out[h * dim + j] /= total[h];
    result.lse[h] = max[h] + std::log(total[h]);
  }
  return result;
}

// SPEC §2.8: with runs of t rows, rows r·t … r·t + t − 1 name one slot at consecutive positions.
void check_query_runs(int tokens, const std::vector<std::int32_t>& slot_ids,
                      const std::vector<std::int32_t>& seq_pos) {
  if (tokens < 1 || slot_ids.size() % static_cast<std::size_t>(tokens) != 0) {
    throw std::invalid_argument("oracle: the rows are not runs of query_tokens");
  }
  for (std::size_t i = 0; i < slot_ids.size(); ++i) {
    if (i % static_cast<std::size_t>(tokens) == 0) continue;
    if (slot_ids[i] != slot_ids[i - 1] || seq_pos[i] != seq_pos[i - 1] + 1) {
      throw std::invalid_argument("oracle: a query run is not one slot at consecutive positions");
    }
  }
}

}  // namespace

DecodeResult decode_attention(const KvCacheView& cache, const DecodeOptions& options,
                              const std::vector<float>& q,
                              const std::vector<std::int32_t>& slot_ids,
                              const std::vector<std::int32_t>& seq_pos) {
  check_query_runs(options.query_tokens, slot_ids, seq_pos);
  const KvCacheConfig& c = cache.config;
  const auto dim = static_cast<std::size_t>(c.head_dim);
  const auto heads = static_cast<std::size_t>(options.n_heads);
  const auto group = heads / static_cast<std::size_t>(c.n_kv_heads);
  const double scale = resolved_scale(options.scale, c.head_dim);
  const bool tq_k = is_turboquant(c.k_format);
  const bool unrotate_output = is_turboquant(c.v_format) && !options.rotated_output;
  DecodeResult result;
  result.out.reserve(slot_ids.size() * heads * dim);
  result.lse.reserve(slot_ids.size() * heads);
  for (std::size_t i = 0; i < slot_ids.size(); ++i) {
    const std::vector<std::int64_t> rows = visible_rows(c, options, seq_pos[i]);
    for (int kv = 0; kv < c.n_kv_heads; ++kv) {
      std::vector<Row> keys, values;
      for (std::int64_t p : rows) {
        const StoredAt at = stored_at(cache, slot_ids[i], p);
        keys.push_back(stored_row(c, c.k_format, cache.k, cache.k_norms, kv, at));
        values.push_back(stored_row(c, c.v_format, cache.v, cache.v_norms, kv, at));
      }
      QueryGroup queries(group, dim);
      for (std::size_t g = 0; g < group; ++g) {
        const float* qh = q.data() + (i * heads + static_cast<std::size_t>(kv) * group + g) * dim;
        Row query(qh, qh + dim);
        if (tq_k) query = tq_rotate(c.head_dim, query);
        queries.set(g, query.data());
      }
      const DecodeResult o = attend(
          queries, rows.size(), [&](std::size_t p) { return keys[p].data(); },
          [&](std::size_t p) { return values[p].data(); }, scale, options.softcap);
      for (std::size_t g = 0; g < group; ++g) {
        Row head(o.out.begin() + static_cast<std::ptrdiff_t>(g * dim),
                 o.out.begin() + static_cast<std::ptrdiff_t>((g + 1) * dim));
        if (unrotate_output) head = tq_unrotate(c.head_dim, head);
        result.out.insert(result.out.end(), head.begin(), head.end());
        result.lse.push_back(o.lse[g]);
      }
    }
  }
  return result;
}

std::vector<double> exact_attention(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int n_heads, int n_kv_heads,
                                    int head_dim, double scale, double softcap) {
  const auto dim = static_cast<std::size_t>(head_dim);
  const auto kv_heads = static_cast<std::size_t>(n_kv_heads);
  const std::size_t positions = k.size() / (kv_heads * dim);
  const auto group = static_cast<std::size_t>(n_heads / n_kv_heads);
  scale = resolved_scale(scale, head_dim);
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(n_heads) * dim);
  for (std::size_t kv = 0; kv < kv_heads; ++kv) {
    QueryGroup queries(group, dim);
    for (std::size_t g = 0; g < group; ++g) queries.set(g, q.data() + (kv * group + g) * dim);
    const auto row_at = [&](const std::vector<float>& rows, std::size_t p) {
      return rows.data() + (p * kv_heads + kv) * dim;
    };
    const DecodeResult o = attend(
        queries, positions, [&](std::size_t p) { return row_at(k, p); },
        [&](std::size_t p) { return row_at(v, p); }, scale, softcap);
    out.insert(out.end(), o.out.begin(), o.out.end());
  }
  return out;
}

}  // namespace turbodecode::oracle
