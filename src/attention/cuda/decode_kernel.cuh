// The decode kernel: one persistent launch of as many blocks as the device holds at once. Every
// block derives the same work list from the index arrays (work_list.cuh), takes an equal share
// of its items (chunks of tasks), streams their K and V rows once through a pipeline of
// shared-memory stages and keeps the online-softmax state (m, l, O) of each of its query
// columns per chunk; the blocks that finish a chunk group, then a task, merge the states
// (chunk_merge.cuh) and write the output, in the same launch.
//
// A block is warp-specialised: a copy warp issues every cp.async (cache_rows.cuh), refilling a
// stage as soon as the compute warps release it; each of the 4 compute warps owns a quarter of
// the head dimension. Per tile of T positions: partial scores per warp quarter (scores.cuh) ->
// their sum with the rows' scales, one exp per score and a rescale per column -> O update
// (values.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "attention/cuda/cache_rows.cuh"
#include "attention/cuda/chunk_merge.cuh"
#include "attention/cuda/codebook_lookup.cuh"
#include "attention/cuda/decode_launch.h"
#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/decode_shape.h"
#include "attention/cuda/scores.cuh"
#include "attention/cuda/values.cuh"
#include "attention/cuda/work_list.cuh"
#include "common/cuda/dependent_launch.cuh"
#include "common/cuda/pipeline_barriers.cuh"
#include "common/cuda/shared_memory_opt_in.cuh"
#include "common/cuda/warp.cuh"
#include "tq/codec_math.h"
#include "tq/cuda/warp_row.cuh"

namespace turbodecode::cuda::decode {

// Barrier among the compute warps alone (the copy warp goes its own way).
__device__ __forceinline__ void compute_warps_sync() {
  named_barrier_sync<1, kComputeThreads>();
}

// exp(m_part − m_total) for the tile softmax, 0 for m_part = −∞ (merge_weight of state.h, but
// with the hardware's approximate 2^x: two instructions instead of about ten, on the tile's
// critical path; relative error about 2^-22, far inside the 2e-3 of SPEC §5).
__device__ __forceinline__ float tile_weight(float m_part, float m_total) {
  constexpr float kLog2E = 1.4426950408889634f;
  float result;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(result) : "f"((m_part - m_total) * kLog2E));
  return m_part == -INFINITY ? 0.0f : result;
}

// The score of pair (column, position t) from the four warps' partial dot products and the
// K row's scale, in a fixed order per K format (tile_formats.h).
template <int D, KTile kTile>
__device__ __forceinline__ float combine_partials(const float* partial, int pairs, int i,
                                                  const float* k_scales, int t,
                                                  float inverse_scale_factor_d512) {
  const float p0 = partial[i], p1 = partial[pairs + i], p2 = partial[2 * pairs + i],
              p3 = partial[3 * pairs + i];
  if constexpr (kTile == KTile::f16) {
    return p0 + p1 + p2 + p3;
  } else if constexpr (kTile == KTile::fp8) {
    return (p0 + p1 + p2 + p3) * k_scales[t];
  } else if constexpr (D == 256) {
    return (p0 + p1 + p2 + p3) * tq::d256_decode_scale(k_scales[t]);
  } else {  // the halves have norms of their own: warps 0-1 hold half 0, warps 2-3 half 1
    return (p0 + p1) * (k_scales[2 * t] * inverse_scale_factor_d512) +
           (p2 + p3) * (k_scales[2 * t + 1] * inverse_scale_factor_d512);
  }
}

// The factor folded into the weight of position t for the V pass (weight set `set`): the FP8
// scale, a TQ decode scale, or 1 for F16.
template <int D, VTile kTile>
__device__ __forceinline__ float value_scale(const float* v_scales, int t, int set,
                                             float inverse_scale_factor_d512) {
  if constexpr (kTile == VTile::f16) {
    return 1.0f;
  } else if constexpr (kTile == VTile::fp8) {
    return v_scales[t];
  } else if constexpr (D == 256) {
    return tq::d256_decode_scale(v_scales[t]);
  } else {
    return v_scales[2 * t + set] * inverse_scale_factor_d512;
  }
}

// Per-thread softmax state: thread i owns pairs i, i + 128, … (pair = column · T + position);
// m is the column's running max, l this thread's share of its sum (the T shares are added once,
// when the chunk's state is written).
template <int kPairsPerThread>
struct SoftmaxShares {
  float m[kPairsPerThread];
  float l[kPairsPerThread];
  std::int64_t lo[kPairsPerThread], hi[kPairsPerThread];  // the column's visible positions

  __device__ void reset() {
#pragma unroll
    for (int k = 0; k < kPairsPerThread; ++k) {
      m[k] = -INFINITY;
      l[k] = 0.0f;
    }
  }
};

// Words of the block's control region: where its share of the work list starts, and the flags
// the merges pass from the thread that counts to the others.
enum ControlWord : int { kStartItem, kItemCount, kGroupDone, kTaskDone };

template <int D, int kColumns, RowFormat KF, RowFormat VF>
struct DecodeBlock {
  static constexpr DecodeShape s{D, kColumns, KF, VF};
  static constexpr int T = s.tile;
  static constexpr int kGroup = merge_group(D);
  using Values = TileValues<D, kColumns, KF, VF>;
  using Shares = SoftmaxShares<s.pairs_per_thread>;
  using Codebook = LaneCodebook<s.shared_table ? s.v_table_copies : 32>;

  const DecodeParams& p;
  unsigned char* shared;
  StageBarriers barriers;
  int thread, warp, lane;

  __device__ float* partial() const { return reinterpret_cast<float*>(shared + s.partial_offset); }
  __device__ float* weights() const { return reinterpret_cast<float*>(shared + s.weight_offset); }
  __device__ float* rescale() const { return reinterpret_cast<float*>(shared + s.rescale_offset); }
  __device__ float* merge_row() const { return reinterpret_cast<float*>(shared + s.merge_offset); }
  __device__ int* control() const { return reinterpret_cast<int*>(shared + s.control_offset); }
  __device__ unsigned* k_table() const {
    return reinterpret_cast<unsigned*>(shared + (s.shared_table ? s.v_table_offset : s.k_table_offset));
  }
  __device__ unsigned* v_table() const {
    return reinterpret_cast<unsigned*>(shared + s.v_table_offset);
  }
  __device__ float* rotated_q() const { return reinterpret_cast<float*>(shared + s.q_offset); }

  __device__ void stage_tables() const {
    if constexpr (s.k_tile == KTile::tq && !s.shared_table) {
      stage_lane_codebook<32, kComputeThreads>(k_table(), p.k.bits);
    }
    if constexpr (s.v_tile == VTile::tq) {
      stage_lane_codebook<s.v_table_copies, kComputeThreads>(v_table(), p.v.bits);
    }
  }

  // TQ K: R_D(q) of each column into shared memory (one warp per column, in registers).
  __device__ __noinline__ void stage_rotated_query(const QueryColumns& columns) const {
    if constexpr (s.k_tile == KTile::tq) {
      constexpr int E = D / 32;
      for (int c = warp; c < kColumns; c += kComputeWarps) {
        float v[E] = {};
        if (c < columns.count) {
          const float* q = p.q + columns.row[c] * p.q_stride[0] + columns.head[c] * p.q_stride[1];
#pragma unroll
          for (int e = 0; e < E; ++e) v[e] = q[lane * E + e];
          warp_row::rotate_forward<D>(v, lane, warp_row::lane_sign_bits<D>(lane));
        }
#pragma unroll
        for (int e = 0; e < E; ++e) rotated_q()[c * D + lane * E + e] = v[e];
      }
      compute_warps_sync();
    }
  }

  // The online softmax of one tile; stores the weights (V scales folded in) and the columns'
  // rescale factors.
  __device__ void softmax_tile(const unsigned char* stage, std::int64_t first, Shares& shares,
                               int columns_here) const {
    const float* k_scales = reinterpret_cast<const float*>(stage + s.stage_k_scales);
    const float* v_scales = reinterpret_cast<const float*>(stage + s.stage_v_scales);
    const float inverse_sf = 1.0f / p.scale_factor_d512;
#pragma unroll
    for (int k = 0; k < s.pairs_per_thread; ++k) {
      const int i = thread + kComputeThreads * k;
      const int column = i / T;
      const int t = i % T;
      const std::int64_t position = first + t;
      float score = -INFINITY;
      if (i < s.pairs && column < columns_here && position >= shares.lo[k] &&
          position <= shares.hi[k]) {
        score = combine_partials<D, s.k_tile>(partial(), s.pairs, i, k_scales, t, inverse_sf);
        score *= p.scale;
        if (p.softcap > 0.0f) score = p.softcap * tanhf(score / p.softcap);
      }
      const float tile_max =
          butterfly_reduce<T>(score, [](float a, float b) { return fmaxf(a, b); });
      const float m_new = fmaxf(shares.m[k], tile_max);
      const float weight = tile_weight(score, m_new);
      const float factor = tile_weight(shares.m[k], m_new);
      shares.l[k] = shares.l[k] * factor + weight;
      shares.m[k] = m_new;
      if (i < s.pairs) {
        if (t == 0) rescale()[column] = factor;
#pragma unroll
        for (int set = 0; set < s.weight_sets; ++set) {
          Values::store_weight(weights(), set, i,
                               weight * value_scale<D, s.v_tile>(v_scales, t, set, inverse_sf));
        }
      }
    }
  }

  // Writes the chunk's states (O slices from every thread, (m, l) from the softmax threads)
  // and starts the next chunk afresh.
  __device__ void write_chunk_state(std::int64_t state, int columns_here, Values& values,
                                    Shares& shares) const {
    values.write(p.state_o + state * D, columns_here);
#pragma unroll
    for (int k = 0; k < s.pairs_per_thread; ++k) {
      const int i = thread + kComputeThreads * k;
      const float l = butterfly_sum<T>(shares.l[k]);
      if (i < s.pairs && i % T == 0 && i / T < columns_here) {
        p.state_ml[state + i / T] = make_float2(shares.m[k], l);
      }
    }
    values.reset();
    shares.reset();
  }

  // The fold of `count` parts of a column (fold_states; fold_warp as there). kStagesFree: the
  // block's share is done and its pipeline stages hold nothing more: a warp that folds alone
  // stages its rows through a quarter of them (fold_staged).
  template <bool kStagesFree>
  __device__ __forceinline__ WarpState<D> fold(const float2* ml, const float* o, int count,
                                               int first_index, int fold_warp) const {
    if constexpr (kStagesFree) {
      constexpr int kWarpRows = s.stages * s.stage_bytes / (D * 4) / kComputeWarps;
      static_assert(kWarpRows >= 1, "a staged row for each warp");
      if (fold_warp < 0) {
        return fold_staged<D>(ml, o, count, kColumns, first_index, lane,
                              reinterpret_cast<float*>(shared) + warp * kWarpRows * D, kWarpRows);
      }
    }
    return fold_states<D>(ml, o, count, kColumns, first_index, fold_warp, lane, merge_row(),
                          [] { compute_warps_sync(); });
  }

  // Counts `done` chunks of the group of chunk `item` (the block's last of that group in this
  // task) as finished and, in the block that finishes the group, merges it; in the block that
  // finishes the task's last group, merges the groups into the output. Not inlined: the merge's
  // registers would otherwise count against the tile loop's, which then spills. kStagesFree:
  // the block's last group, after which it has nothing more to stream.
  template <bool kStagesFree>
  __device__ __noinline__ void finish_group(const RunPart& part, const WorkItem& item,
                                            std::int64_t task, int done, int columns_here) const {
    compute_warps_sync();  // every thread's state writes, before the count (fence in arrive)
    const std::int64_t chunk = part.first_chunk + item.chunk_index;
    const std::int64_t first_group = part.first_chunk / kGroup;
    const std::int64_t last_chunk = part.first_chunk + part.chunks - 1;
    const std::int64_t group_index = chunk / kGroup;  // absolute
    const int group = static_cast<int>(group_index - first_group);
    const std::int64_t group_begin = group_index * kGroup;
    const std::int64_t group_first = group_begin > part.first_chunk ? group_begin : part.first_chunk;
    const std::int64_t group_end = group_begin + kGroup - 1;
    const int group_chunks =
        static_cast<int>((group_end < last_chunk ? group_end : last_chunk) - group_first + 1);
    const int groups = static_cast<int>(last_chunk / kGroup - first_group + 1);
    unsigned* counters = p.counters + task * (1 + p.task_groups);
    if (thread == 0) control()[kGroupDone] = arrive(counters + 1 + group, done, group_chunks);
    compute_warps_sync();
    if (!control()[kGroupDone]) return;
    const std::int64_t group_state = (task * p.task_groups + group) * kColumns;
    const std::int64_t first_state =
        (task * p.task_chunks + (group_first - part.first_chunk)) * kColumns;
    // Fewer columns than warps: the warps fold each column together; else a warp per column.
    const bool together = columns_here < kComputeWarps;
    const int fold_warp = together ? warp : -1;
    for (int c = together ? 0 : warp; c < columns_here; c += together ? 1 : kComputeWarps) {
      const WarpState<D> merged =
          fold<kStagesFree>(p.state_ml + first_state + c, p.state_o + (first_state + c) * D,
                            group_chunks, static_cast<int>(group_first % 32), fold_warp);
      if (fold_warp > 0) continue;
      // A task of one group is done: folding its one group state again would change no bit.
      if (groups == 1) {
        write_output<D>(p, column_target(p, part, item, c), merged, lane);
      } else {
        store_state<D>(merged, p.group_ml + group_state + c, p.group_o + (group_state + c) * D,
                       lane);
      }
    }
    if (groups == 1) return;
    compute_warps_sync();
    if (thread == 0) control()[kTaskDone] = arrive(counters, 1, groups);
    compute_warps_sync();
    if (!control()[kTaskDone]) return;
    const std::int64_t task_state = task * p.task_groups * kColumns;
    for (int c = together ? 0 : warp; c < columns_here; c += together ? 1 : kComputeWarps) {
      const WarpState<D> merged =
          fold<kStagesFree>(p.group_ml + task_state + c, p.group_o + (task_state + c) * D,
                            groups, static_cast<int>(first_group % 32), fold_warp);
      if (fold_warp <= 0) write_output<D>(p, column_target(p, part, item, c), merged, lane);
    }
  }

  // `count` arrivals on a completion counter that expects `expected`, by one thread between two
  // barriers of the compute warps. The fence before the count makes the block's writes before
  // the first barrier visible to the device first; the last arrival's fence after it orders the
  // other blocks' writes before what the block reads after the second barrier (fences are
  // cumulative). True for the last arrival, which resets the counter for the next launch.
  __device__ static bool arrive(unsigned* counter, int count, int expected) {
    __threadfence();
    const unsigned before = atomicAdd(counter, static_cast<unsigned>(count));
    const bool last = before + count == static_cast<unsigned>(expected);
    if (last) {
      atomicExch(counter, 0u);
      __threadfence();
    }
    return last;
  }

  // The compute warps' walk over the block's `count` items.
  __device__ void compute(WorkCursor cursor, int count) const {
    stage_tables();
    compute_warps_sync();
    const Codebook k_codebook(k_table(), lane);
    Values values(v_table(), thread);
    Shares shares;
    shares.reset();
    int tile = 0;
    while (count > 0) {
      const RunPart part = cursor.part;
      if (!part.valid) {
        write_invalid_run<D, kComputeThreads>(p, part.run);
        cursor.advance(p);
        --count;
        continue;
      }
      const WorkItem first_item = item_of(part, cursor.item);
      const int task_items = min(part.chunks - first_item.chunk_index, count);
      const int columns_here = part.columns_here(p, first_item.column_chunk);
      QueryColumns columns{};
      columns.count = columns_here;
      for (int c = 0; c < columns_here; ++c) {
        const ColumnTarget target = column_target(p, part, first_item, c);
        columns.row[c] = target.row;
        columns.head[c] = target.head;
      }
#pragma unroll
      for (int k = 0; k < s.pairs_per_thread; ++k) {
        const int column = (thread + kComputeThreads * k) / T;
        shares.lo[k] = 1;
        shares.hi[k] = 0;
        if (column < columns_here) {
          const attention::Window w = query_row(p, columns.row[column]).window;
          shares.lo[k] = w.first_position();
          shares.hi[k] = w.last_position();
        }
      }
      stage_rotated_query(columns);
      const TileScorer<D, kColumns, KF, VF> scorer(p, columns, rotated_q(), warp, lane);
      const std::int64_t task = task_index(p, part, first_item);
      int group_done = 0;
      for (int n = 0; n < task_items; ++n) {
        const WorkItem item{first_item.kv_head, first_item.column_chunk,
                            first_item.chunk_index + n};
        const ItemRange range = item_range(part, item);
        for (std::int64_t first = range.from / T * T; first <= range.to; first += T, ++tile) {
          const int stage_index = tile % s.stages;
          mbarrier_wait(barriers.full + stage_index, (tile / s.stages) & 1);
          const unsigned char* stage = shared + stage_index * s.stage_bytes;
          scorer.score(stage, k_codebook, partial());
          compute_warps_sync();
          softmax_tile(stage, first, shares, columns_here);
          compute_warps_sync();
          values.accumulate(stage, weights(), rescale());
          mbarrier_arrive(barriers.empty + stage_index);  // after this thread's reads
        }
        const std::int64_t state = (task * p.task_chunks + item.chunk_index) * kColumns;
        write_chunk_state(state, columns_here, values, shares);
        // The block counts its chunks of a group once, when it leaves the group.
        ++group_done;
        const std::int64_t chunk = part.first_chunk + item.chunk_index;
        if (n + 1 == task_items && task_items == count) {  // the share's last chunk
          finish_group<true>(part, item, task, group_done, columns_here);
          return;
        }
        if (n + 1 == task_items || (chunk + 1) % kGroup == 0) {
          finish_group<false>(part, item, task, group_done, columns_here);
          group_done = 0;
        }
      }
      cursor.item += task_items - 1;
      cursor.advance(p);
      count -= task_items;
    }
  }
};

static_assert(sizeof(RunPart) <= kControlBytes - kControlWordBytes && alignof(RunPart) <= 8,
              "the share's first part fits the control region");
static_assert(kControlWordBytes >= 4 * static_cast<int>(sizeof(int)), "room for the control words");

template <int D, int kColumns, RowFormat KF, RowFormat VF>
__global__ void __launch_bounds__(kBlockThreads,
                                  DecodeShape(D, kColumns, KF, VF).resident_blocks())
    decode_kernel(const __grid_constant__ DecodeParams p) {
  constexpr DecodeShape s(D, kColumns, KF, VF);
  static_assert(attention::kChunkAlign % s.tile == 0, "tiles divide every chunk");
  extern __shared__ __align__(16) unsigned char shared[];
  const StageBarriers barriers{reinterpret_cast<std::uint64_t*>(shared + s.barrier_offset),
                               reinterpret_cast<std::uint64_t*>(shared + s.barrier_offset) +
                                   s.stages};
  int* control = reinterpret_cast<int*>(shared + s.control_offset);
  const int thread = static_cast<int>(threadIdx.x);
  // A dependent launch (dependent_launch.cuh): the next kernel's blocks may take SMs as this
  // launch's blocks leave; this one starts (shared memory only) while the kernel before it
  // finishes, and reads nothing before that kernel has completed.
  allow_dependent_grids();
  if (thread == 0) {
    for (int stage = 0; stage < s.stages; ++stage) {
      mbarrier_init(barriers.full + stage, 32);                // every lane of the copy warp
      mbarrier_init(barriers.empty + stage, kComputeThreads);  // every compute thread
    }
  }
  wait_for_prior_grids();
  RunPart* start_part = reinterpret_cast<RunPart*>(shared + s.control_offset + kControlWordBytes);
  if (thread < 32) {  // the block's share of the work list
    RunPart part{};
    const WorkShare share = block_share(p, blockIdx.x, gridDim.x, part);
    if (thread == 0) {
      control[kStartItem] = share.start.item;
      control[kItemCount] = share.count;
      *start_part = part;
    }
  }
  __syncthreads();  // the block's only full barrier: the copy warp leaves after its stream
  const int count = control[kItemCount];
  if (count == 0) return;
  WorkCursor cursor{*start_part, control[kStartItem]};
  if (cursor.item >= cursor.part.items) {  // the share starts with the next part's first item
    cursor.item = cursor.part.items - 1;
    cursor.advance(p);
  }
  if (thread >= kComputeThreads) {
    stream_items<D, kColumns, KF, VF>(p, cursor, count, shared, barriers);
    return;
  }
  const DecodeBlock<D, kColumns, KF, VF> block{p, shared, barriers, thread, thread / 32,
                                               thread % 32};
  block.compute(cursor, count);
}

template <int D, int kColumns, RowFormat KF, RowFormat VF>
void launch_decode(const DecodeParams& p, cudaStream_t stream) {
  constexpr int kSharedBytes = DecodeShape(D, kColumns, KF, VF).shared_bytes;
  launch_dependent(decode_kernel<D, kColumns, KF, VF>, p.blocks, kBlockThreads, kSharedBytes,
                   stream, p);
}

template <int D, int kColumns, RowFormat KF, RowFormat VF>
DecodeKernel decode_kernel_for() {
  constexpr int kSharedBytes = DecodeShape(D, kColumns, KF, VF).shared_bytes;
  static SharedMemoryOptIn opt_in;
  opt_in.ensure(reinterpret_cast<const void*>(&decode_kernel<D, kColumns, KF, VF>), kSharedBytes);
  return {reinterpret_cast<const void*>(&decode_kernel<D, kColumns, KF, VF>), kSharedBytes,
          &launch_decode<D, kColumns, KF, VF>};
}

}  // namespace turbodecode::cuda::decode
