// CPU decode attention (SPEC §2). Three passes over the thread pool:
//   1. TQ K only: q rotated by R_D once per query row, into the workspace (SPEC §2.4).
//   2. One work item per (query, KV head, split): for each visible position, the scores of all
//      query heads of the GQA group against the K row, the online softmax, and one decode of
//      the V row shared by the whole group (SPEC §2.6). States go to the workspace.
//   3. One item per output row: merge the splits' states (state.h), normalise, and for TQ V
//      un-rotate unless the caller asked for the rotated result.
// Every item's arithmetic depends only on its own query, so results are batch invariant and
// independent of the thread count. The passes are compiled once per Highway target;
// run_decode_cpu runs the best one the CPU supports.
#include "attention/decode_cpu.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention/decode_cpu.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/row_accumulate-inl.h"
#include "attention/row_dots-inl.h"
#include "attention/row_readers-inl.h"
#include "attention/score_softmax-inl.h"
#include "attention/split_policy.h"
#include "attention/state.h"
#include "attention/window.h"
#include "attention/workspace.h"
#include "common/thread_pool.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "tq/codec_cpu.h"
#include "tq/codec_math.h"
#include "tq/tables.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::attention::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

// Positions scored before their V rows are accumulated: one max/rescale per tile and head.
constexpr int kTilePositions = 32;
// Split boundaries fall on tile boundaries.
constexpr std::int64_t kSplitAlign = kTilePositions;

// One side (K or V) of the cache: where a row lives, and how to turn it into f32 values.
// A TQ row decodes to codebook values times one scale per part (the whole row at D = 256,
// each half at D = 512); an F16 row is one part with scale 1.
class CacheRows {
 public:
  CacheRows(const KvCacheConfig& config, RowFormat format, const TensorView& rows,
            const TensorView& norms)
      : format_(format),
        head_dim_(config.head_dim),
        parts_(is_quantized(format) ? norms_per_row(config.head_dim) : 1),
        scale_factor_d512_(config.scale_factor_d512),
        rows_(static_cast<const std::uint8_t*>(rows.data)),
        norms_(static_cast<const float*>(norms.data)),
        row_bytes_(rows.strides[2] * static_cast<std::int64_t>(dtype_bytes(rows.dtype))),
        rows_strides_{rows.strides[0], rows.strides[1]},
        norms_strides_{norms.strides[0], norms.strides[1], norms.strides[2]},
        codebook_(is_quantized(format) ? tq::codebook(format_bits(format)).data() : nullptr) {}

  int parts() const { return parts_; }

  // Asks for a row's cache lines ahead of use: rows of one KV head are contiguous, but the
  // hardware prefetchers stop at every 4 KiB page, which a split crosses every few rows.
  void prefetch(std::int64_t slot, std::int64_t head, std::int64_t row) const {
    const std::uint8_t* data = row_address(slot, head, row);
    for (std::int64_t line = 0; line < row_bytes_; line += 64) {
      hwy::Prefetch(data + line);
    }
  }
  int part_length() const { return head_dim_ / parts_; }

  // Calls body(reader) with the simd reader of this side's format (row_readers-inl.h): one
  // format switch per tile, not per row.
  template <class Body>
  void with_reader(const Body& body) const {
    switch (format_) {
      case RowFormat::f16:
        return body(simd::F16Reader{});
      case RowFormat::tq4:
        return body(simd::CodeReader<4>{codebook_});
      case RowFormat::tq5:
        return body(simd::CodeReader<5>{codebook_});
      case RowFormat::tq6:
        return body(simd::CodeReader<6>{codebook_});
      default:
        return body(simd::CodeReader<8>{codebook_});
    }
  }

  const std::uint8_t* row_address(std::int64_t slot, std::int64_t head, std::int64_t row) const {
    const std::int64_t element_bytes = format_ == RowFormat::f16 ? 2 : 1;
    return rows_ + (slot * rows_strides_[0] + head * rows_strides_[1]) * element_bytes +
           row * row_bytes_;
  }

  // scales[b]: the factor of part b's values (1 for F16 rows).
  void part_scales(std::int64_t slot, std::int64_t head, std::int64_t row, float* scales) const {
    scales[0] = scales[1] = 1.0f;
    if (format_ == RowFormat::f16) return;
    const float* norm =
        norms_ + slot * norms_strides_[0] + head * norms_strides_[1] + row * norms_strides_[2];
    if (parts_ == 1) {
      scales[0] = tq::d256_decode_scale(norm[0]);
    } else {
      scales[0] = tq::d512_decode_scale(norm[0], scale_factor_d512_);
      scales[1] = tq::d512_decode_scale(norm[1], scale_factor_d512_);
    }
  }

 private:
  RowFormat format_;
  int head_dim_;
  int parts_;
  float scale_factor_d512_;
  const std::uint8_t* rows_;
  const float* norms_;
  std::int64_t row_bytes_;  // bytes between consecutive positions
  std::int64_t rows_strides_[2];
  std::int64_t norms_strides_[3];
  const float* codebook_;
};

// Everything the passes read, resolved once per call.
struct DecodeJob {
  const DecodePlan& plan;
  CacheRows k;
  CacheRows v;
  const TensorView& q;
  const TensorView& out;
  const TensorView& slot_ids;
  const TensorView& seq_pos;
  void* workspace;
  CpuWorkspaceLayout layout;
  SplitPolicy policy;
  int group;       // query heads per KV head
  bool rotated_q;  // TQ K: scores use R_D(q)

  std::int32_t slot(std::int64_t query) const {
    return slot_ids.as<const std::int32_t>()[query * slot_ids.strides[0]];
  }
  Window window(std::int64_t query) const {
    const std::int32_t position = seq_pos.as<const std::int32_t>()[query * seq_pos.strides[0]];
    return query_window(plan.options.mask, position, plan.cache.capacity,
                        plan.options.sliding_window);
  }
  float* row(const TensorView& t, std::int64_t query, int head) const {
    return t.as<float>() + query * t.strides[0] + head * t.strides[1];
  }
  // The query vector the scores use: raw for F16 K, rotated (pass 1) for TQ K.
  const float* query_vector(std::int64_t query, int head) const {
    if (rotated_q) return layout.rotated_q(workspace, query, head);
    return row(q, query, head);
  }
};

// Per-chunk scratch of pass 2, reused across the chunk's items.
struct SplitScratch {
  explicit SplitScratch(int head_dim, int group)
      : v_tile(static_cast<std::size_t>(kTilePositions * head_dim)),
        coefs(static_cast<std::size_t>(2 * kTilePositions * group)),
        scores(static_cast<std::size_t>(kTilePositions * group)),
        m(static_cast<std::size_t>(group)),
        l(static_cast<std::size_t>(group)),
        queries(static_cast<std::size_t>(group)) {}
  std::vector<float> v_tile, coefs, scores, m, l;
  std::vector<const float*> queries;  // the group's query vectors for the current item
};

float soft_capped(float score, float softcap) {
  return softcap > 0.0f ? softcap * std::tanh(score / softcap) : score;
}

// Scores of group heads [first_head, first_head + Heads) against Rows K rows at tile
// positions [t, t + Rows): each part's dot products times that part's scale, summed over the
// parts, then scaled and soft-capped into scratch.scores[h·kTilePositions + t].
template <int Heads, int Rows, class Reader>
void score_block(const DecodeJob& job, const Reader& reader, const std::uint8_t* const* rows,
                 const float (*scales)[2], int first_head, int t, SplitScratch& scratch) {
  const int part = job.k.part_length();
  float dots[Rows * Heads] = {};
  for (int b = 0; b < job.k.parts(); ++b) {
    float part_dots[Rows * Heads];
    simd::dot_rows<Heads, Rows>(simd::RowTag(), reader, rows, scratch.queries.data() + first_head,
                                b * part, part, part_dots);
    for (int r = 0; r < Rows; ++r) {
      for (int k = 0; k < Heads; ++k)
        dots[r * Heads + k] += scales[r][b] * part_dots[r * Heads + k];
    }
  }
  for (int r = 0; r < Rows; ++r) {
    for (int k = 0; k < Heads; ++k) {
      scratch.scores[static_cast<std::size_t>((first_head + k) * kTilePositions + t + r)] =
          soft_capped(dots[r * Heads + k] * job.plan.options.scale, job.plan.options.softcap);
    }
  }
}

// score_block over the whole group, four heads at a time where it can.
template <int Rows, class Reader>
void score_rows(const DecodeJob& job, const Reader& reader, const std::uint8_t* const* rows,
                const float (*scales)[2], int t, SplitScratch& scratch) {
  for (int h = 0; h < job.group;) {
    if (job.group - h >= 4) {
      score_block<4, Rows>(job, reader, rows, scales, h, t, scratch);
      h += 4;
    } else if (job.group - h >= 2) {
      score_block<2, Rows>(job, reader, rows, scales, h, t, scratch);
      h += 2;
    } else {
      score_block<1, Rows>(job, reader, rows, scales, h, t, scratch);
      h += 1;
    }
  }
}

// Scores of every group head against the K rows of one tile: scores[h·kTilePositions + t].
// Rows go two at a time, so each chunk of q is loaded once per pair. Meanwhile prefetches the
// tile's V rows (read after the scores) and K rows a tile ahead.
void score_tile(const DecodeJob& job, std::int64_t query, int kv_head, const Window& window,
                std::int64_t tile_begin, int tile_length, std::int64_t range_end,
                SplitScratch& scratch) {
  const std::int32_t slot = job.slot(query);
  job.k.with_reader([&](const auto& reader) {
    for (int t = 0; t < tile_length; t += 2) {
      const int pair_length = std::min(2, tile_length - t);
      const std::uint8_t* rows[2];
      float scales[2][2];
      for (int r = 0; r < pair_length; ++r) {
        const std::int64_t position = window.first + tile_begin + t + r;
        const std::int64_t row = window.row(position);
        job.v.prefetch(slot, kv_head, row);
        if (tile_begin + t + r + kTilePositions < range_end) {
          job.k.prefetch(slot, kv_head, window.row(position + kTilePositions));
        }
        rows[r] = job.k.row_address(slot, kv_head, row);
        job.k.part_scales(slot, kv_head, row, scales[r]);
      }
      if (pair_length == 2) {
        score_rows<2>(job, reader, rows, scales, t, scratch);
      } else {
        score_rows<1>(job, reader, rows, scales, t, scratch);
      }
    }
  });
}

// Online-softmax update of each head for a scored tile; turns scores into weights exp(s − m)
// and rescales the head's running O when its max grows.
void update_softmax(const DecodeJob& job, int tile_length, float* const* o_rows,
                    SplitScratch& scratch) {
  const int dim = job.plan.cache.head_dim;
  for (int h = 0; h < job.group; ++h) {
    float* scores = scratch.scores.data() + static_cast<std::ptrdiff_t>(h) * kTilePositions;
    std::fill(scores + tile_length, scores + kTilePositions, -INFINITY);
    const float m_old = scratch.m[static_cast<std::size_t>(h)];
    const float tile_max = simd::max(simd::RowTag(), scores, kTilePositions);
    const float m_new = std::isnan(tile_max) ? tile_max : std::fmax(m_old, tile_max);
    const float correction = merge_weight(m_old, m_new);
    if (correction != 1.0f) simd::scale(simd::RowTag(), correction, o_rows[h], dim);
    simd::exp_shifted(simd::RowTag(), scores, m_new, kTilePositions);
    float l = scratch.l[static_cast<std::size_t>(h)] * correction;
    for (int t = 0; t < tile_length; ++t) l += scores[t];
    scratch.m[static_cast<std::size_t>(h)] = m_new;
    scratch.l[static_cast<std::size_t>(h)] = l;
  }
}

// O_h += coefs_h,t · value(t, j) over one part of the V rows for every head of the group, a
// few heads at a time.
template <class Values>
void accumulate_part(const DecodeJob& job, const Values& value, int tile_length, const float* coefs,
                     float* const* o_rows, int part_begin) {
  const int part = job.v.part_length();
  float* o[4];
  for (int h = 0; h < job.group;) {
    const int block = job.group - h >= 4 ? 4 : job.group - h >= 2 ? 2 : 1;
    for (int k = 0; k < block; ++k) o[k] = o_rows[h + k] + part_begin;
    const float* block_coefs = coefs + static_cast<std::ptrdiff_t>(h) * kTilePositions;
    const simd::RowTag d;
    if (block == 4) {
      simd::accumulate_tile<4, 2>(d, value, tile_length, block_coefs, kTilePositions, o, part);
    } else if (block == 2) {
      simd::accumulate_tile<2, 4>(d, value, tile_length, block_coefs, kTilePositions, o, part);
    } else {
      simd::accumulate_tile<1, 4>(d, value, tile_length, block_coefs, kTilePositions, o, part);
    }
    h += block;
  }
}

// O_h += w_h,t · v_t for the tile's V rows, each decoded once for the whole group; the rows'
// part scales are folded into per-head coefficients. A group of up to four heads is one block,
// and so is a group of eight with one chunk per head: their rows decode straight into the
// block's registers. Other groups decode the rows into a tile buffer first, which their
// blocks of four then share. (Measured: for 8 heads one direct block beats buffered blocks of
// four by 15%; for 16 heads, buffered blocks of eight lose to blocks of four.)
void accumulate_values(const DecodeJob& job, std::int64_t query, int kv_head, const Window& window,
                       std::int64_t tile_begin, int tile_length, float* const* o_rows,
                       SplitScratch& scratch) {
  const std::int32_t slot = job.slot(query);
  const int dim = job.plan.cache.head_dim;
  const int part = job.v.part_length();
  const int parts = job.v.parts();
  const int group = job.group;
  const simd::RowTag d;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const std::uint8_t* rows[kTilePositions];
  for (int t = 0; t < tile_length; ++t) {
    const std::int64_t row = window.row(window.first + tile_begin + t);
    rows[t] = job.v.row_address(slot, kv_head, row);
    float part_scales[2];
    job.v.part_scales(slot, kv_head, row, part_scales);
    for (int b = 0; b < parts; ++b) {
      for (int h = 0; h < group; ++h) {
        const std::size_t at = static_cast<std::size_t>(h * kTilePositions + t);
        scratch.coefs[static_cast<std::size_t>(b * group * kTilePositions) + at] =
            scratch.scores[at] * part_scales[b];
      }
    }
  }
  const auto part_coefs = [&](int b) {
    return scratch.coefs.data() + static_cast<std::ptrdiff_t>(b) * group * kTilePositions;
  };
  if (group > 4 && group != 8) {
    float* tile = scratch.v_tile.data();
    job.v.with_reader([&](const auto& reader) {
      for (int t = 0; t < tile_length; ++t) {
        for (int j = 0; j < dim; j += lanes) {
          hn::StoreU(reader.load(d, rows[t], j), d,
                     tile + static_cast<std::ptrdiff_t>(t) * dim + j);
        }
      }
    });
    for (int b = 0; b < parts; ++b) {
      const int begin = b * part;
      const auto from_tile = [d, tile, dim, begin](int t, int j) {
        return hn::LoadU(d, tile + static_cast<std::ptrdiff_t>(t) * dim + begin + j);
      };
      accumulate_part(job, from_tile, tile_length, part_coefs(b), o_rows, begin);
    }
    return;
  }
  job.v.with_reader([&](const auto& reader) {
    for (int b = 0; b < parts; ++b) {
      const int begin = b * part;
      const auto direct = [&](int t, int j) { return reader.load(d, rows[t], begin + j); };
      if (group == 8) {
        float* o[8];
        for (int h = 0; h < 8; ++h) o[h] = o_rows[h] + begin;
        simd::accumulate_tile<8, 1>(d, direct, tile_length, part_coefs(b), kTilePositions, o, part);
      } else {
        accumulate_part(job, direct, tile_length, part_coefs(b), o_rows, begin);
      }
    }
  });
}

// Pass 2 for one (query, KV head, split): fills that split's states and O rows of the group.
void attend_split(const DecodeJob& job, std::int64_t query, int kv_head, int split,
                  SplitScratch& scratch, std::vector<float*>& o_rows) {
  const Window window = job.window(query);
  const int splits = splits_for_length(job.policy, window.visible());
  if (split >= splits) return;  // the merge reads only the query's own splits
  const SplitRange range = split_range(window.visible(), splits, split, kSplitAlign);
  const int dim = job.plan.cache.head_dim;
  for (int h = 0; h < job.group; ++h) {
    o_rows[static_cast<std::size_t>(h)] =
        job.layout.partial_o(job.workspace, query, kv_head * job.group + h, split);
    std::fill_n(o_rows[static_cast<std::size_t>(h)], dim, 0.0f);
  }
  for (int h = 0; h < job.group; ++h) {
    scratch.queries[static_cast<std::size_t>(h)] = job.query_vector(query, kv_head * job.group + h);
  }
  std::fill(scratch.m.begin(), scratch.m.end(), -INFINITY);
  std::fill(scratch.l.begin(), scratch.l.end(), 0.0f);
  for (std::int64_t tile = range.begin; tile < range.end; tile += kTilePositions) {
    const int length = static_cast<int>(std::min<std::int64_t>(kTilePositions, range.end - tile));
    score_tile(job, query, kv_head, window, tile, length, range.end, scratch);
    update_softmax(job, length, o_rows.data(), scratch);
    accumulate_values(job, query, kv_head, window, tile, length, o_rows.data(), scratch);
  }
  for (int h = 0; h < job.group; ++h) {
    job.layout.states(job.workspace, query, kv_head * job.group + h)[split] = {
        scratch.m[static_cast<std::size_t>(h)], scratch.l[static_cast<std::size_t>(h)]};
  }
}

// Pass 3 for one output row: merge (SPEC §2.5), normalise, un-rotate.
void finish_row(const DecodeJob& job, std::int64_t query, int head) {
  const int dim = job.plan.cache.head_dim;
  const int splits = splits_for_length(job.policy, job.window(query).visible());
  const SoftmaxState* states = job.layout.states(job.workspace, query, head);
  float m = -INFINITY;
  for (int s = 0; s < splits; ++s) m = std::fmax(m, states[s].m);
  float* result = job.row(job.out, query, head);
  std::fill_n(result, dim, 0.0f);
  float l = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float weight = merge_weight(states[s].m, m);
    l += weight * states[s].l;
    simd::axpy(simd::RowTag(), weight, job.layout.partial_o(job.workspace, query, head, s), result,
               dim);
  }
  simd::scale(simd::RowTag(), output_scale(l), result, dim);
  if (is_quantized(job.plan.cache.v_format) && !job.plan.options.rotated_output) {
    tq::unrotate_row(dim, result);
  }
}

}  // namespace

// The per-target body of run_decode_cpu (decode_cpu.h).
void run_decode_cpu(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                    const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                    const TensorView& workspace) {
  const KvCacheConfig& config = plan.cache;
  const DecodeJob job{
      plan,
      CacheRows(config, config.k_format, cache.k, cache.k_norms),
      CacheRows(config, config.v_format, cache.v, cache.v_norms),
      q,
      out,
      slot_ids,
      seq_pos,
      workspace.data,
      CpuWorkspaceLayout(plan),
      {plan.max_splits, plan.min_split_tokens, plan.target_splits, plan.options.fixed_splits},
      plan.options.n_heads / config.n_kv_heads,
      is_quantized(config.k_format)};
  const std::int64_t n = q.shape[0];
  const int heads = plan.options.n_heads;
  const int dim = config.head_dim;

  if (is_quantized(config.k_format)) {
    parallel_for(n * heads, 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        float* rotated =
            job.layout.rotated_q(job.workspace, r / heads, static_cast<int>(r % heads));
        std::copy_n(job.row(q, r / heads, static_cast<int>(r % heads)), dim, rotated);
        tq::rotate_row(dim, rotated);
      }
    });
  }

  int batch_splits = 1;
  for (std::int64_t i = 0; i < n; ++i) {
    batch_splits = std::max(batch_splits, splits_for_length(job.policy, job.window(i).visible()));
  }
  const std::int64_t per_query = static_cast<std::int64_t>(config.n_kv_heads) * batch_splits;
  parallel_for(n * per_query, 1, [&](std::int64_t begin, std::int64_t end) {
    SplitScratch scratch(dim, job.group);
    std::vector<float*> o_rows(static_cast<std::size_t>(job.group));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t query = item / per_query;
      const int kv_head = static_cast<int>(item % per_query / batch_splits);
      const int split = static_cast<int>(item % batch_splits);
      attend_split(job, query, kv_head, split, scratch, o_rows);
    }
  });

  parallel_for(n * heads, 4, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r)
      finish_row(job, r / heads, static_cast<int>(r % heads));
  });
}

}  // namespace turbodecode::attention::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace turbodecode::attention {

HWY_EXPORT(run_decode_cpu);

void run_decode_cpu(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                    const TensorView& slot_ids, const TensorView& seq_pos, const TensorView& out,
                    const TensorView& workspace) {
  HWY_DYNAMIC_DISPATCH(run_decode_cpu)(plan, cache, q, slot_ids, seq_pos, out, workspace);
}

}  // namespace turbodecode::attention
#endif  // HWY_ONCE
