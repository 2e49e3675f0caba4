// CPU decode attention (SPEC §2, §2.8, §2.9). Three passes over the thread pool:
//   1. TQ K only: q rotated by R_D once per query row, into the workspace (SPEC §2.4).
//   2. One work item per (rows of a run that share a chunk size, KV head, chunk) (cpu_work.h):
//      tile by tile of 32 positions aligned on absolute positions, the scores of every query
//      head of those rows against each K row read, each head's online softmax over its own
//      row's positions, and one decode of each V row for all of them (SPEC §2.6, §2.8). The
//      state of each (row, head, chunk) goes to the workspace.
//   3. One item per output row: merge its chunks' states in chunk order (state.h), normalise,
//      write the lse, and for TQ V un-rotate unless the caller asked for the rotated result.
// A head's scores are summed in one order whatever heads share its block, its softmax and sums
// skip the positions its row does not see, and its chunks and tiles are aligned on absolute
// positions: its result is bitwise the same alone, in a run, in any batch and on any number of
// threads. The passes are compiled once per Highway target; run_decode_cpu runs the best one
// the CPU supports.
#include "attention/decode_cpu.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention/decode_cpu.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "attention/cache_rows.h"
#include "attention/cpu_work.h"
#include "attention/row_accumulate-inl.h"
#include "attention/row_dots-inl.h"
#include "attention/row_readers-inl.h"
#include "attention/score_softmax-inl.h"
#include "attention/state.h"
#include "attention/workspace.h"
#include "common/thread_pool.h"
#include "hwy/highway.h"
#include "tq/codec_cpu.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::attention::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

// Positions scored before their V rows are accumulated: one max/rescale per tile and head.
// Chunk sizes are multiples of it, so a tile never straddles two chunks.
constexpr int kTilePositions = 32;

// Everything the passes read, resolved once per call.
struct DecodeJob {
  const DecodePlan& plan;
  cache::RowAddressing addressing;  // where the row of each position lives
  CacheRows k;
  CacheRows v;
  const TensorView& q;
  const TensorView& out;
  const TensorView& lse;
  void* workspace;
  CpuWorkspaceLayout layout;
  std::vector<QueryRow> rows;
  int group;       // query heads per KV head
  bool rotated_q;  // TQ K: scores use R_D(q)

  float* row(const TensorView& t, std::int64_t query, int head) const {
    return t.as<float>() + query * t.strides[0] + head * t.strides[1];
  }
  // The query vector the scores use: raw for F16 and FP8 K, rotated (pass 1) for TQ K.
  const float* query_vector(std::int64_t query, int head) const {
    if (rotated_q) return layout.rotated_q(workspace, query, head);
    return row(q, query, head);
  }
};

// The rows of one tile: positions [tile, tile + kTilePositions), of which [first, last) are
// seen by at least one head of the item.
struct Tile {
  std::int64_t start;
  int first, last;
  const std::uint8_t* k_rows[kTilePositions];
  const std::uint8_t* v_rows[kTilePositions];
  float k_scales[kTilePositions][2];
  float v_scales[kTilePositions][2];
};

// Scratch of pass 2, reused across a thread's items. Item heads (index r·group + g for row r
// of the item and head g of the group) keep their softmax state and O row across tiles; the
// heads active in a tile (those whose row sees one of its positions) are packed to the front
// of the per-tile arrays.
struct ItemScratch {
  ItemScratch(int head_dim, int heads)
      : v_tile(static_cast<std::size_t>(kTilePositions * head_dim)),
        coefs(static_cast<std::size_t>(2 * kTilePositions * heads)),
        scores(static_cast<std::size_t>(kTilePositions * heads)),
        m(static_cast<std::size_t>(heads)),
        l(static_cast<std::size_t>(heads)),
        o(static_cast<std::size_t>(heads)),
        queries(static_cast<std::size_t>(heads)),
        active(static_cast<std::size_t>(heads)),
        active_queries(static_cast<std::size_t>(heads)),
        active_o(static_cast<std::size_t>(heads)),
        begin(static_cast<std::size_t>(heads)),
        end(static_cast<std::size_t>(heads)) {}
  std::vector<float> v_tile, coefs, scores;  // per active head: [head][kTilePositions]
  std::vector<float> m;                      // per item head
  // per item head; summed in double: f32 sums over a chunk's positions drift by ~√n ulp,
  // enough to move a row cut into other chunks or shards (SPEC §2.10) past 1e-6
  std::vector<double> l;
  std::vector<float*> o;
  std::vector<const float*> queries;
  int active_heads = 0;
  std::vector<int> active;  // item head of each active head
  std::vector<const float*> active_queries;
  std::vector<float*> active_o;
  std::vector<int> begin, end;  // tile positions [begin, end) each active head sees

  float* head_scores(int a) {
    return scores.data() + static_cast<std::ptrdiff_t>(a) * kTilePositions;
  }
};

// Calls body(reader) with the reader of a side's row format (row_readers-inl.h): one format
// switch per tile, not per row.
template <class Body>
void with_reader(const CacheRows& side, const Body& body) {
  const float* codebook = side.codebook();
  switch (side.format()) {
    case RowFormat::f16:
      return body(simd::F16Reader{});
    case RowFormat::fp8:
      return body(simd::Fp8Reader{});
    case RowFormat::tq3:
      return body(simd::CodeReader<3>{codebook});
    case RowFormat::tq4:
      return body(simd::CodeReader<4>{codebook});
    case RowFormat::tq5:
      return body(simd::CodeReader<5>{codebook});
    case RowFormat::tq6:
      return body(simd::CodeReader<6>{codebook});
    default:
      return body(simd::CodeReader<8>{codebook});
  }
}

float soft_capped(float score, float softcap) {
  return softcap > 0.0f ? softcap * std::tanh(score / softcap) : score;
}

// Scores of active heads [first_head, first_head + Heads) against Rows K rows at tile
// positions [t, t + Rows): each part's dot products times that part's scale, summed over the
// parts, then scaled and soft-capped into the heads' scores.
template <int Heads, int Rows, class Reader>
void score_block(const DecodeJob& job, const Reader& reader, const Tile& tile, int first_head,
                 int t, ItemScratch& scratch) {
  const int part = job.k.part_length();
  float dots[Rows * Heads] = {};
  for (int b = 0; b < job.k.parts(); ++b) {
    float part_dots[Rows * Heads];
    simd::dot_rows<Heads, Rows>(simd::RowTag(), reader, tile.k_rows + t,
                                scratch.active_queries.data() + first_head, b * part, part,
                                part_dots);
    for (int r = 0; r < Rows; ++r) {
      for (int h = 0; h < Heads; ++h) {
        // One rounding, explicitly: a contracted or uncontracted a += b·c could differ
        // between block shapes.
        dots[r * Heads + h] =
            std::fma(tile.k_scales[t + r][b], part_dots[r * Heads + h], dots[r * Heads + h]);
      }
    }
  }
  for (int r = 0; r < Rows; ++r) {
    for (int h = 0; h < Heads; ++h) {
      scratch.head_scores(first_head + h)[t + r] =
          soft_capped(dots[r * Heads + h] * job.plan.options.scale, job.plan.options.softcap);
    }
  }
}

// The scores of a block of Heads heads over the tile's positions, kDotBlockRows<Heads>
// positions at a time, then the rest one position at a time.
template <int Heads, class Reader>
void score_heads(const DecodeJob& job, const Reader& reader, const Tile& tile, int first_head,
                 ItemScratch& scratch) {
  constexpr int kRows = simd::kDotBlockRows<Heads>;
  int t = tile.first;
  for (; t + kRows <= tile.last; t += kRows) {
    score_block<Heads, kRows>(job, reader, tile, first_head, t, scratch);
  }
  for (; t < tile.last; ++t) score_block<Heads, 1>(job, reader, tile, first_head, t, scratch);
}

// Scores of every active head against the tile's K rows; a head's positions outside its own
// row's range become −inf, so they weigh nothing and never reach its max.
void score_tile(const DecodeJob& job, const Tile& tile, ItemScratch& scratch) {
  with_reader(job.k, [&](const auto& reader) {
    for (int a = 0; a < scratch.active_heads;) {
      const int left = scratch.active_heads - a;
      if (left >= 4) {
        score_heads<4>(job, reader, tile, a, scratch);
        a += 4;
      } else if (left >= 2) {
        score_heads<2>(job, reader, tile, a, scratch);
        a += 2;
      } else {
        score_heads<1>(job, reader, tile, a, scratch);
        a += 1;
      }
    }
  });
  for (int a = 0; a < scratch.active_heads; ++a) {
    float* scores = scratch.head_scores(a);
    std::fill(scores, scores + scratch.begin[a], -INFINITY);
    std::fill(scores + scratch.end[a], scores + kTilePositions, -INFINITY);
  }
}

// Σ_t weights[t] over a tile in double, in one fixed pairwise tree: a chain of 32 dependent
// additions per head and tile took about 4% of pass 2's time (in cache, F16 K and V). Positions
// a head does not see hold weight 0, so they add nothing.
double tile_sum(const float* weights) {
  double sums[kTilePositions];
  for (int t = 0; t < kTilePositions; ++t) sums[t] = weights[t];
  for (int n = kTilePositions / 2; n >= 1; n /= 2) {
    for (int t = 0; t < n; ++t) sums[t] += sums[t + n];
  }
  return sums[0];
}

// Online-softmax update of each active head for a scored tile; turns scores into weights
// exp(s − m) and rescales the head's running O when its max grows.
void update_softmax(const DecodeJob& job, ItemScratch& scratch) {
  const int dim = job.plan.cache.head_dim;
  for (int a = 0; a < scratch.active_heads; ++a) {
    const auto head = static_cast<std::size_t>(scratch.active[a]);
    float* scores = scratch.head_scores(a);
    const float m_old = scratch.m[head];
    const float tile_max = simd::max(simd::RowTag(), scores, kTilePositions);
    const float m_new = std::isnan(tile_max) ? tile_max : std::fmax(m_old, tile_max);
    const float correction = merge_weight(m_old, m_new);
    if (correction != 1.0f) simd::scale(simd::RowTag(), correction, scratch.active_o[a], dim);
    simd::exp_shifted(simd::RowTag(), scores, m_new, kTilePositions);
    scratch.m[head] = m_new;
    scratch.l[head] = scratch.l[head] * correction + tile_sum(scores);
  }
}

// O_a += coefs_a,t · value(t, j) over one part of the V rows for every active head, a few heads
// at a time.
template <class Values>
void accumulate_part(const DecodeJob& job, const Values& value, const float* coefs,
                     ItemScratch& scratch, int part_begin) {
  const int part = job.v.part_length();
  const int heads = scratch.active_heads;
  float* o[4];
  for (int a = 0; a < heads;) {
    const int block = heads - a >= 4 ? 4 : heads - a >= 2 ? 2 : 1;
    for (int k = 0; k < block; ++k) o[k] = scratch.active_o[a + k] + part_begin;
    const float* block_coefs = coefs + static_cast<std::ptrdiff_t>(a) * kTilePositions;
    const int* begin = scratch.begin.data() + a;
    const int* end = scratch.end.data() + a;
    const simd::RowTag d;
    if (block == 4) {
      simd::accumulate_tile<4, 2>(d, value, begin, end, block_coefs, kTilePositions, o, part);
    } else if (block == 2) {
      simd::accumulate_tile<2, 4>(d, value, begin, end, block_coefs, kTilePositions, o, part);
    } else {
      simd::accumulate_tile<1, 4>(d, value, begin, end, block_coefs, kTilePositions, o, part);
    }
    a += block;
  }
}

// O_a += w_a,t · v_t for the tile's V rows, each decoded once for every active head; the rows'
// part scales are folded into per-head coefficients. Up to four heads are one block, and so
// are eight with one chunk per head: their rows decode straight into the block's registers.
// Other counts decode the rows into a tile buffer first, which their blocks of four then
// share. (Measured: for 8 heads one direct block beats buffered blocks of four by 15%; for 16
// heads, buffered blocks of eight lose to blocks of four.)
void accumulate_values(const DecodeJob& job, const Tile& tile, ItemScratch& scratch) {
  const int dim = job.plan.cache.head_dim;
  const int part = job.v.part_length();
  const int parts = job.v.parts();
  const int heads = scratch.active_heads;
  const simd::RowTag d;
  const int lanes = static_cast<int>(hn::Lanes(d));
  for (int b = 0; b < parts; ++b) {
    for (int a = 0; a < heads; ++a) {
      const float* weights = scratch.head_scores(a);
      float* coefs =
          scratch.coefs.data() + static_cast<std::ptrdiff_t>(b * heads + a) * kTilePositions;
      for (int t = tile.first; t < tile.last; ++t) coefs[t] = weights[t] * tile.v_scales[t][b];
    }
  }
  const auto part_coefs = [&](int b) {
    return scratch.coefs.data() + static_cast<std::ptrdiff_t>(b) * heads * kTilePositions;
  };
  const std::uint8_t* const* rows = tile.v_rows;
  if (heads > 4 && heads != 8) {
    float* buffer = scratch.v_tile.data();
    with_reader(job.v, [&](const auto& reader) {
      for (int t = tile.first; t < tile.last; ++t) {
        for (int j = 0; j < dim; j += lanes) {
          hn::StoreU(reader.load(d, rows[t], j), d,
                     buffer + static_cast<std::ptrdiff_t>(t) * dim + j);
        }
      }
    });
    for (int b = 0; b < parts; ++b) {
      const int begin = b * part;
      const auto from_buffer = [d, buffer, dim, begin](int t, int j) {
        return hn::LoadU(d, buffer + static_cast<std::ptrdiff_t>(t) * dim + begin + j);
      };
      accumulate_part(job, from_buffer, part_coefs(b), scratch, begin);
    }
    return;
  }
  with_reader(job.v, [&](const auto& reader) {
    for (int b = 0; b < parts; ++b) {
      const int begin = b * part;
      const simd::RowsOfReader<simd::RowTag, std::decay_t<decltype(reader)>> direct{reader, rows,
                                                                                    begin};
      if (heads == 8) {
        float* o[8];
        for (int a = 0; a < 8; ++a) o[a] = scratch.active_o[a] + begin;
        simd::accumulate_tile<8, 1>(d, direct, scratch.begin.data(), scratch.end.data(),
                                    part_coefs(b), kTilePositions, o, part);
      } else {
        accumulate_part(job, direct, part_coefs(b), scratch, begin);
      }
    }
  });
}

// The heads of `item` whose rows see positions of the tile starting at `start`, and the
// positions [first, last) of the tile any of them sees. False when no row sees any.
bool activate_heads(const DecodeJob& job, const WorkItem& item, std::int64_t start,
                    std::int64_t chunk_end, Tile& tile, ItemScratch& scratch) {
  scratch.active_heads = 0;
  tile.start = start;
  tile.first = kTilePositions;
  tile.last = 0;
  for (int r = 0; r < item.rows; ++r) {
    const QueryRow& row = job.rows[static_cast<std::size_t>(item.first_row + r)];
    const auto begin = static_cast<int>(std::max<std::int64_t>(row.lo - start, 0));
    const auto end = static_cast<int>(
        std::min<std::int64_t>(std::min(row.hi + 1, chunk_end) - start, kTilePositions));
    if (begin >= end) continue;
    tile.first = std::min(tile.first, begin);
    tile.last = std::max(tile.last, end);
    for (int g = 0; g < job.group; ++g) {
      const int head = r * job.group + g;
      const int a = scratch.active_heads++;
      scratch.active[a] = head;
      scratch.active_queries[a] = scratch.queries[static_cast<std::size_t>(head)];
      scratch.active_o[a] = scratch.o[static_cast<std::size_t>(head)];
      scratch.begin[a] = begin;
      scratch.end[a] = end;
    }
  }
  return scratch.active_heads > 0;
}

// Calls body(t, at) for each tile position t in [from, to) with its row, the position being
// start + t: located once per run of positions whose rows follow each other in one block
// (cache/row_location.h), so a contiguous cache or pages of 32 rows or more locate a tile once,
// twice where a ring wraps inside it.
template <class Body>
void for_each_row(const DecodeJob& job, std::int32_t slot, std::int64_t start, int from, int to,
                  const Body& body) {
  for (int t = from; t < to;) {
    const cache::RowRun run =
        job.addressing.locate_run(slot, static_cast<std::int32_t>(start + t));
    const auto count = static_cast<int>(std::min<std::int64_t>(to - t, run.rows));
    for (int i = 0; i < count; ++i) {
      body(t + i, cache::RowLocation{run.first.block, run.first.row + i});
    }
    t += count;
  }
}

// Row addresses and scales of the tile's positions [first, last); prefetches its V rows (read
// after the scores) and the K rows of the next tile up to `next_end`, a row at a time as each
// is located.
void locate_tile(const DecodeJob& job, std::int32_t slot, int kv_head, std::int64_t next_end,
                 Tile& tile) {
  for_each_row(job, slot, tile.start, tile.first, tile.last, [&](int t, cache::RowLocation at) {
    tile.k_rows[t] = job.k.address(at, kv_head);
    tile.v_rows[t] = job.v.address(at, kv_head);
    job.k.part_scales(at, kv_head, tile.k_scales[t]);
    job.v.part_scales(at, kv_head, tile.v_scales[t]);
    job.v.prefetch(at, kv_head);
  });
  const std::int64_t next = tile.start + kTilePositions;
  const auto next_last = static_cast<int>(std::min<std::int64_t>(tile.last, next_end - next));
  for_each_row(job, slot, next, tile.first, next_last,
               [&](int, cache::RowLocation at) { job.k.prefetch(at, kv_head); });
}

// Pass 2 for one work item: fills the (row, head, chunk) states and O rows of its rows.
void attend_chunk(const DecodeJob& job, const WorkItem& item, ItemScratch& scratch) {
  const QueryRow& first_row = job.rows[static_cast<std::size_t>(item.first_row)];
  const QueryRow& last_row = job.rows[static_cast<std::size_t>(item.first_row + item.rows - 1)];
  const std::int64_t chunk_begin = item.chunk * first_row.chunk;
  const std::int64_t chunk_end = chunk_begin + first_row.chunk;
  const int dim = job.plan.cache.head_dim;
  for (int r = 0; r < item.rows; ++r) {
    const std::int64_t query = item.first_row + r;
    const QueryRow& row = job.rows[static_cast<std::size_t>(query)];
    for (int g = 0; g < job.group; ++g) {
      const auto head = static_cast<std::size_t>(r * job.group + g);
      const int query_head = item.kv_head * job.group + g;
      scratch.queries[head] = job.query_vector(query, query_head);
      scratch.m[head] = -INFINITY;
      scratch.l[head] = 0.0f;
      scratch.o[head] = nullptr;
      if (row.sees_nothing() || item.chunk < row.first_chunk() || item.chunk > row.last_chunk()) {
        continue;
      }
      scratch.o[head] = job.layout.partial_o(job.workspace, query, query_head,
                                             static_cast<int>(item.chunk - row.first_chunk()));
      std::fill_n(scratch.o[head], dim, 0.0f);
    }
  }
  const std::int64_t lo = std::max(chunk_begin, first_row.lo);
  const std::int64_t end = std::min(chunk_end, last_row.hi + 1);
  Tile tile;
  for (std::int64_t start = lo / kTilePositions * kTilePositions; start < end;
       start += kTilePositions) {
    if (!activate_heads(job, item, start, chunk_end, tile, scratch)) continue;
    locate_tile(job, first_row.slot, item.kv_head, end, tile);
    score_tile(job, tile, scratch);
    update_softmax(job, scratch);
    accumulate_values(job, tile, scratch);
  }
  for (int r = 0; r < item.rows; ++r) {
    for (int g = 0; g < job.group; ++g) {
      const auto head = static_cast<std::size_t>(r * job.group + g);
      if (scratch.o[head] == nullptr) continue;
      const std::int64_t query = item.first_row + r;
      const QueryRow& row = job.rows[static_cast<std::size_t>(query)];
      job.layout.states(job.workspace, query,
                        item.kv_head * job.group + g)[item.chunk - row.first_chunk()] = {
          scratch.m[head], static_cast<float>(scratch.l[head])};
    }
  }
}

// Pass 3 for one output row: merge (SPEC §2.5), normalise, lse (SPEC §2.9), un-rotate.
void finish_row(const DecodeJob& job, std::int64_t query, int head) {
  const int dim = job.plan.cache.head_dim;
  const int chunks = job.rows[static_cast<std::size_t>(query)].chunks();
  const SoftmaxState* states = job.layout.states(job.workspace, query, head);
  float m = -INFINITY;
  for (int c = 0; c < chunks; ++c) m = std::fmax(m, states[c].m);
  float* result = job.row(job.out, query, head);
  std::fill_n(result, dim, 0.0f);
  double l = 0.0;  // in double, as within a chunk (ItemScratch::l)
  for (int c = 0; c < chunks; ++c) {
    const float weight = merge_weight(states[c].m, m);
    l += static_cast<double>(weight) * states[c].l;
    simd::axpy(simd::RowTag(), weight, job.layout.partial_o(job.workspace, query, head, c), result,
               dim);
  }
  simd::scale(simd::RowTag(), output_scale(static_cast<float>(l)), result, dim);
  if (job.lse.present()) {
    job.lse.as<float>()[query * job.lse.strides[0] + head * job.lse.strides[1]] =
        l == 0.0 ? -INFINITY : static_cast<float>(m + std::log(l));
  }
  if (is_turboquant(job.plan.cache.v_format) && !job.plan.options.rotated_output) {
    tq::unrotate_row(dim, result);
  }
}

}  // namespace

// The per-target body of run_decode_cpu (decode_cpu.h).
void run_decode_cpu(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                    const TensorView& slot_ids, const TensorView& seq_pos, const DecodeShard& shard,
                    const TensorView& out, const TensorView& lse, const TensorView& workspace) {
  const KvCacheConfig& config = plan.cache;
  const DecodeJob job{plan,
                      cache::row_addressing(cache),
                      CacheRows(config, config.k_format, cache.k, cache.k_norms),
                      CacheRows(config, config.v_format, cache.v, cache.v_norms),
                      q,
                      out,
                      lse,
                      workspace.data,
                      CpuWorkspaceLayout(plan),
                      resolve_rows(plan, slot_ids, seq_pos, shard),
                      plan.options.n_heads / config.n_kv_heads,
                      is_turboquant(config.k_format)};
  const std::int64_t n = q.shape[0];
  const int heads = plan.options.n_heads;
  const int dim = config.head_dim;

  if (job.rotated_q) {
    parallel_for(n * heads, 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        float* rotated =
            job.layout.rotated_q(job.workspace, r / heads, static_cast<int>(r % heads));
        std::copy_n(job.row(q, r / heads, static_cast<int>(r % heads)), dim, rotated);
        tq::rotate_row(dim, rotated);
      }
    });
  }

  const std::vector<WorkItem> items = work_items(plan, job.rows);
  const int item_heads = plan.options.query_tokens * job.group;
  parallel_for(static_cast<std::int64_t>(items.size()), 1,
               [&](std::int64_t begin, std::int64_t end) {
                 ItemScratch scratch(dim, item_heads);
                 for (std::int64_t i = begin; i < end; ++i) {
                   attend_chunk(job, items[static_cast<std::size_t>(i)], scratch);
                 }
               });

  parallel_for(n * heads, 4, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      finish_row(job, r / heads, static_cast<int>(r % heads));
    }
  });
}

}  // namespace turbodecode::attention::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace turbodecode::attention {

HWY_EXPORT(run_decode_cpu);

void run_decode_cpu(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                    const TensorView& slot_ids, const TensorView& seq_pos, const DecodeShard& shard,
                    const TensorView& out, const TensorView& lse, const TensorView& workspace) {
  HWY_DYNAMIC_DISPATCH(run_decode_cpu)
  (plan, cache, q, slot_ids, seq_pos, shard, out, lse, workspace);
}

}  // namespace turbodecode::attention
#endif  // HWY_ONCE
