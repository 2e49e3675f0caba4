// The merge of the decode kernel (SPEC §2.5), done inside the persistent launch by the blocks
// that finish last. Chunk states merge in two levels: the chunks of a row in one group of
// merge_group(D) (by absolute chunk index) merge into a group state as soon as the group's last
// chunk is done, and a task's group states into the output when its last group is done (a task
// of one group goes straight to the output). Both levels are the same fold (fold_states, or
// fold_staged by a block that has nothing more to stream), by all compute warps one query column
// at a time or by each warp for its own columns. The tree and the orders depend only on a row's
// own chunks, so a row's bits do not depend on the batch, the columns beside it, or which block
// merges it.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/decode_shape.h"
#include "attention/cuda/work_list.cuh"
#include "attention/state.h"
#include "common/cuda/cp_async.cuh"
#include "common/cuda/warp.cuh"
#include "tq/cuda/warp_row.cuh"

namespace turbodecode::cuda::decode {

// A merged state held by one warp: lane l holds elements [l·D/32, (l + 1)·D/32) of O.
template <int D>
struct WarpState {
  float m = -INFINITY;
  float l = 0.0f;
  float o[D / 32] = {};
};

// The merge weight of part k, exp(m_k − m) (0 for a part that saw nothing): parts k < 32 from
// the lane that loaded its (m, l), lane (first_index + k) mod 32, else from the part's state.
// Group folds have at most 32 parts; task folds up to 34 with automatic chunks at D 256, 130 at
// D 512. k is the same in every lane.
__device__ __forceinline__ float part_weight(float held, const float2* ml, int k, int stride,
                                             int first_index, float m) {
  if (k < 32) return __shfl_sync(0xffffffffu, held, (first_index + k) % 32);
  return attention::merge_weight(__ldcg(ml + k * stride).x, m);
}

// sum += w · row, for lane l's elements [l·D/32, (l + 1)·D/32) of a part's O row.
template <int D>
__device__ __forceinline__ void add_weighted(const float4 (&row)[D / 128], float w,
                                             float (&sum)[D / 32]) {
#pragma unroll
  for (int v = 0; v < D / 128; ++v) {
    sum[4 * v] = fmaf(row[v].x, w, sum[4 * v]);
    sum[4 * v + 1] = fmaf(row[v].y, w, sum[4 * v + 1]);
    sum[4 * v + 2] = fmaf(row[v].z, w, sum[4 * v + 2]);
    sum[4 * v + 3] = fmaf(row[v].w, w, sum[4 * v + 3]);
  }
}

// The O rows of quarter `quarter` of a fold's parts (those whose absolute index mod 32 lies in
// [8·quarter, 8·quarter + 8)), weighted by exp(m_k − m) and added in index order into `sum`
// (zeros on entry), two rows in flight, each part's weight from part_weight; parts that saw
// nothing are skipped. Lane l adds elements [l·D/32, (l + 1)·D/32).
template <int D>
__device__ __forceinline__ void quarter_sum(const float2* ml, const float* o, int count,
                                            int stride, int first_index, int quarter, float m,
                                            float held, int lane, float (&sum)[D / 32]) {
  constexpr int E = D / 32;
  constexpr int kInFlight = 2;
  // Runs of 8 indices, 32 apart; the first may start before part 0.
  const int first_run = (8 * quarter - first_index % 32 + 32) % 32 - 32;
  for (int run = first_run; run < count; run += 32) {
    for (int k0 = run; k0 < run + 8; k0 += kInFlight) {
      float4 rows[kInFlight][E / 4];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        const int k = k0 + j;
        if (k < 0 || k >= count) continue;
        const float4* part_row = reinterpret_cast<const float4*>(
            o + static_cast<std::int64_t>(k) * stride * D + lane * E);
#pragma unroll
        for (int v = 0; v < E / 4; ++v) rows[j][v] = __ldcg(part_row + v);
      }
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        const int k = k0 + j;
        if (k < 0 || k >= count) continue;
        const float w = part_weight(held, ml, k, stride, first_index, m);
        if (w == 0.0f) continue;  // saw nothing: contributes exactly nothing
        add_weighted<D>(rows[j], w, sum);
      }
    }
  }
}

// The scalars of a fold of `count` parts (m, l at ml[k · stride], part k having absolute index
// first_index + k): the max of the maxima, l summed with weights exp(m_k − m) (parts that saw
// nothing skipped), and `held`, the weight of this lane's first part (lane (index mod 32) loads
// its parts' (m, l) once and adds its share of l in index order; the shares meet in a fixed tree).
struct FoldScalars {
  float m, l, held;
};

__device__ __forceinline__ FoldScalars fold_scalars(const float2* ml, int count, int stride,
                                                    int first_index, int lane) {
  const int own = (lane - first_index % 32 + 32) % 32;  // this lane's first part
  const float2 first_part = own < count ? __ldcg(ml + own * stride) : make_float2(-INFINITY, 0.0f);
  float m = fmaxf(-INFINITY, first_part.x);
  for (int k = own + 32; k < count; k += 32) m = fmaxf(m, __ldcg(ml + k * stride).x);
  m = warp_max(m);
  const float held = attention::merge_weight(first_part.x, m);
  float share = own < count ? fmaf(first_part.y, held, 0.0f) : 0.0f;
  for (int k = own + 32; k < count; k += 32) {
    const float2 part = __ldcg(ml + k * stride);
    share = fmaf(part.y, attention::merge_weight(part.x, m), share);
  }
  return {m, warp_sum(share), held};
}

// Adds the compute warps' quarter sums (warp w holding quarter w's in `mine`) as
// q0 + (q1 + (q2 + q3)), through `row` (D floats of shared memory) between calls of `sync`;
// warp 0's `mine` ends as the whole sum.
template <int D, class Sync>
__device__ __forceinline__ void add_quarters(float (&mine)[D / 32], int warp, int lane, float* row,
                                             Sync sync) {
  constexpr int E = D / 32;
  for (int quarter = kComputeWarps - 1; quarter >= 0; --quarter) {
    if (quarter == warp) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        if (quarter < kComputeWarps - 1) mine[e] += row[lane * E + e];
        if (quarter > 0) row[lane * E + e] = mine[e];
      }
    }
    sync();
  }
}

// One step of a warp's sums meeting as q0 + (q1 + (q2 + q3)), taken from quarter 3 down:
// o ← q + o (o ← q for quarter 3).
template <int D>
__device__ __forceinline__ void meet_quarter(const float (&q)[D / 32], int quarter,
                                             float (&o)[D / 32]) {
#pragma unroll
  for (int e = 0; e < D / 32; ++e) o[e] = quarter < kComputeWarps - 1 ? q[e] + o[e] : q[e];
}

// Folds `count` parts (m, l at ml[k · stride], O rows at o + k · stride · D), part k having
// absolute index first_index + k (a chunk or a group number): fold_scalars, then O as the sum
// of the four quarters' sums (quarter_sum), added as q0 + (q1 + (q2 + q3)). `warp` < 0: this
// warp folds alone; else the kComputeWarps compute warps fold together, warp w summing quarter
// w (add_quarters), and warp 0 holds the result. Either way the same operations in the same
// order: every order depends on the absolute indices alone, so a part that saw nothing changes
// no bit wherever it sits and whoever folds. Reads through L2 (.cg): other SMs wrote the states
// in this launch.
template <int D, class Sync>
__device__ __forceinline__ WarpState<D> fold_states(const float2* ml, const float* o, int count,
                                                    int stride, int first_index, int warp,
                                                    int lane, float* row, Sync sync) {
  static_assert(kComputeWarps == 4, "a compute warp per quarter of the 32 indices of a group");
  constexpr int E = D / 32;
  const FoldScalars f = fold_scalars(ml, count, stride, first_index, lane);
  WarpState<D> s;
  s.m = f.m;
  s.l = f.l;
  float mine[E] = {};
  if (warp >= 0) {
    quarter_sum<D>(ml, o, count, stride, first_index, warp, f.m, f.held, lane, mine);
    add_quarters<D>(mine, warp, lane, row, sync);
#pragma unroll
    for (int e = 0; e < E; ++e) s.o[e] = mine[e];  // warp 0's: the whole sum
    return s;
  }
  for (int quarter = kComputeWarps - 1; quarter >= 0; --quarter) {
#pragma unroll
    for (int e = 0; e < E; ++e) mine[e] = 0.0f;
    quarter_sum<D>(ml, o, count, stride, first_index, quarter, f.m, f.held, lane, mine);
    meet_quarter<D>(mine, quarter, s.o);
  }
  return s;
}

// Parts [first, first + batch) of a fold's O rows (row k at o + k · stride · D) into shared
// memory `rows` (D floats apart), by the warp's lanes, with 16-byte cp.async through L2 (other
// SMs wrote the rows in this launch); one committed group.
template <int D>
__device__ __forceinline__ void stage_rows(float* rows, const float* o, int first, int batch,
                                           int stride, int lane) {
  constexpr int kPieces = D / 4;  // 16-byte pieces of a row
  for (int i = lane; i < batch * kPieces; i += 32) {
    const int k = first + i / kPieces;
    const int piece = i % kPieces;
    copy_async_16(rows + (k - first) * D + piece * 4,
                  o + static_cast<std::int64_t>(k) * stride * D + piece * 4, 16);
  }
  commit_copies();
}

// fold_states for a warp that folds alone in a block whose pipeline stages are free (its share
// is done): the parts' O rows are first copied into the warp's own shared memory (`rows`, room
// for `capacity` rows of D floats), as many as fit at once, so the fold waits for one round trip
// to L2 per batch instead of one per two rows. The four quarter sums grow side by side, each in
// index order, and meet as q0 + (q1 + (q2 + q3)): the same operations in the same order as
// fold_states, so the same bits.
template <int D>
__device__ __forceinline__ WarpState<D> fold_staged(const float2* ml, const float* o, int count,
                                                    int stride, int first_index, int lane,
                                                    float* rows, int capacity) {
  constexpr int E = D / 32;
  constexpr int kQuarters = kComputeWarps;
  FoldScalars f{};
  float sums[kQuarters][E] = {};
  for (int first = 0; first < count; first += capacity) {
    const int batch = count - first < capacity ? count - first : capacity;
    stage_rows<D>(rows, o, first, batch, stride, lane);
    if (first == 0) f = fold_scalars(ml, count, stride, first_index, lane);  // while rows fly
    wait_copies<0>();
    __syncwarp();
    for (int k = first; k < first + batch; ++k) {
      const float w = part_weight(f.held, ml, k, stride, first_index, f.m);
      if (w == 0.0f) continue;  // saw nothing: contributes exactly nothing
      float4 part_row[D / 128];
      const float4* staged = reinterpret_cast<const float4*>(rows + (k - first) * D + lane * E);
#pragma unroll
      for (int v = 0; v < D / 128; ++v) part_row[v] = staged[v];
      const int quarter = (first_index + k) % 32 / 8;
#pragma unroll
      for (int q = 0; q < kQuarters; ++q) {
        if (q == quarter) add_weighted<D>(part_row, w, sums[q]);
      }
    }
    __syncwarp();  // every lane is done with the batch before the next one lands
  }
  WarpState<D> s;
  s.m = f.m;
  s.l = f.l;
#pragma unroll
  for (int quarter = kQuarters - 1; quarter >= 0; --quarter) {
    meet_quarter<D>(sums[quarter], quarter, s.o);
  }
  return s;
}

template <int D>
__device__ __forceinline__ void store_state(const WarpState<D>& s, float2* ml, float* o,
                                            int lane) {
  constexpr int E = D / 32;
  if (lane == 0) *ml = make_float2(s.m, s.l);
  float4* row = reinterpret_cast<float4*>(o + lane * E);
#pragma unroll
  for (int v = 0; v < E / 4; ++v) {
    row[v] = make_float4(s.o[4 * v], s.o[4 * v + 1], s.o[4 * v + 2], s.o[4 * v + 3]);
  }
}

// The output row and head of column `column` of a task.
struct ColumnTarget {
  int row;
  int head;
};

__device__ __forceinline__ ColumnTarget column_target(const DecodeParams& p, const RunPart& part,
                                                      const WorkItem& item, int column) {
  const int c = item.column_chunk * p.columns + column;
  return {part.run * p.query_tokens + part.first_token + c / p.group,
          item.kv_head * p.group + c % p.group};
}

// Normalises a task's merged state into the output row (and lse), un-rotating it for TQ V
// unless the caller asked for the rotated result.
template <int D>
__device__ __forceinline__ void write_output(const DecodeParams& p, const ColumnTarget& target,
                                             WarpState<D> s, int lane) {
  constexpr int E = D / 32;
  const float normaliser = attention::output_scale(s.l);
#pragma unroll
  for (int e = 0; e < E; ++e) s.o[e] *= normaliser;
  if (p.unrotate_output) {
    warp_row::rotate_inverse<D>(s.o, lane, warp_row::lane_sign_bits<D>(lane));
  }
  float* out = p.out + target.row * p.out_stride[0] + target.head * p.out_stride[1];
#pragma unroll
  for (int e = 0; e < E; ++e) out[lane * E + e] = s.o[e];  // `out` may be any strided view
  if (p.lse != nullptr && lane == 0) {
    p.lse[target.row * p.lse_stride[0] + target.head * p.lse_stride[1]] =
        s.l > 0.0f ? s.m + logf(s.l) : -INFINITY;
  }
}

// The rows of an invalid run (graph replay with impossible indices): NaN outputs and lse, by
// the block's compute threads.
template <int D, int kThreads>
__device__ __forceinline__ void write_invalid_run(const DecodeParams& p, int run) {
  const int rows = p.query_tokens * p.n_heads;
  for (int i = static_cast<int>(threadIdx.x); i < rows * D; i += kThreads) {
    const int row = run * p.query_tokens + i / D / p.n_heads;
    const int head = i / D % p.n_heads;
    p.out[row * p.out_stride[0] + head * p.out_stride[1] + i % D] = NAN;
    if (p.lse != nullptr && i % D == 0) {
      p.lse[row * p.lse_stride[0] + head * p.lse_stride[1]] = NAN;
    }
  }
}

}  // namespace turbodecode::cuda::decode
