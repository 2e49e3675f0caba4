// norm-mix and HC-pre in one launch on a grid of blocks (docs/hc.md, "The grid kernel"):
// the kernel for the shapes the cluster kernels (cluster_small_t.cu, row_clusters.cu) do
// not take: n_hc ≠ 4, E > 5120 or E % 8 ≠ 0, views that do not allow 16-byte loads. The span
// arithmetic is spans.cuh's. A block covers one half or one whole chunk for one or more groups
// of up to 8 rows, sums its spans in span order and stores per row the M partial dot products and
// the partial sum of squares in the workspace. The last block of a group to arrive (a counter it
// resets to zero) adds the chunks up in a fixed order and finishes the group's rows: mix, then for
// HC-pre split, collapse and RMSNorm with the same block routines as the standalone kernels.
//
// Batch invariance: a row's value at every step depends only on the row and the row width.
// Each output element of an MMA depends only on its own row of A and column of B, the spans,
// halves and chunks are added in fixed orders, and how many rows, halves or groups a block
// takes (chosen from T below) changes only which block does which of those operations.
#include <cuda_fp16.h>

#include <cuda/atomic>

#include <cstdint>

#include "common/cuda/cuda_check.cuh"
#include "hc/cuda/hc_rows.cuh"
#include "hc/cuda/pre/launch.h"
#include "hc/cuda/pre/spans.cuh"
#include "hc/pre_workspace.h"

namespace turbodecode::cuda {
namespace {

using hc::kPreMaxGroupRows;
static_assert(kRowWarps == 2 * kSpansPerHalf, "a block's warps: two halves of four spans");
static_assert(kRoundOutputs * kPreMaxGroupRows == kRowThreads, "one reduced entry per thread");
// The combine gives a warp this many entries of a row (M = 24: two items per row).
constexpr int kCombineEntries = 13;
constexpr int kHoistedEntries = 4;  // split chunks: M = 24 is seven items, one per warp
// Launch policy (sized for an H200: 132 SMs, two resident HC-pre blocks each).
constexpr std::int64_t kHalfBlocksBelow = 2 * 132;  // fewer whole-chunk blocks: split chunks
constexpr std::int64_t kSmallBatchRows = 64;        // up to here groups of kPreGroupRows rows
constexpr int kBandGroups = 4;                      // groups per block when T is large
// Quads per thread the last block's collapse + RMSNorm keeps in registers (E ≤ 4096; wider rows
// take the uncached routines, with the same results). Two blocks per SM leave 128 registers per
// thread: 6, as in the standalone kernels, was slower (docs/hc.md, "Tried, not kept").
constexpr int kPreCachedQuads = 4;

struct PreLaunch {
  hc::NormMixArgs norm_mix;
  hc::SplitCollapseArgs split_collapse;  // read only by the HC-pre variant
  float* partials = nullptr;             // [rows][chunks][2][M + 1]
  unsigned* counters = nullptr;          // one per group
  int chunks = 0;
  int group_rows = 0;
  std::int64_t groups = 0;
  int groups_per_block = 1;  // a block runs its columns for this many consecutive groups
  int halves_per_block = 2;  // 1: each half chunk has its own block (small T)
  bool vector_x = false;     // x rows and streams allow 16-byte loads of 8 columns
  bool vector_w = false;     // so do the W rows
};

struct RowGroup {
  std::int64_t t0;
  int rows;
};

__device__ __forceinline__ RowGroup row_group(const PreLaunch& p, std::int64_t g) {
  const std::int64_t t0 = g * p.group_rows;
  const std::int64_t left = p.norm_mix.rows - t0;
  return {t0, static_cast<int>(left < p.group_rows ? left : p.group_rows)};
}

// A warp's span. Lane 4g + t holds row g of the group (B and D columns) and outputs g, g + 8 of
// each 16-output tile (A and D rows), at columns column .. column + 7.
struct SpanTask {
  std::int64_t column;
  int half;  // the block's half, 0 or 1
  int span;
  int g;
  int t;
  bool active;  // false for the second half's warps when a block has one half
};

__device__ __forceinline__ SpanTask span_task(const PreLaunch& p) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  SpanTask task;
  task.half = warp / kSpansPerHalf;
  task.span = warp % kSpansPerHalf;
  task.g = lane / 4;
  task.t = lane % 4;
  task.active = task.half < p.halves_per_block;
  const std::int64_t half = static_cast<std::int64_t>(blockIdx.x) * p.halves_per_block + task.half;
  task.column = half * kHalfWidth + task.span * kSpanWidth + task.t * kLaneColumns;
  return task;
}

// Row g of the group at the lane's columns; zero past the row width or the group.
__device__ __forceinline__ void load_inputs(const PreLaunch& p, const SpanTask& task,
                                            RowGroup group, LaneInputs& x) {
  const hc::NormMixArgs& a = p.norm_mix;
  const std::int64_t width = a.n_hc * a.embd;
#pragma unroll
  for (int j = 0; j < kLaneColumns; ++j) x.v[j] = 0.0f;
  if (task.g >= group.rows || task.column >= width) return;
  const std::int64_t t = group.t0 + task.g;
  int h = static_cast<int>(task.column / a.embd);
  std::int64_t d = task.column - h * a.embd;
  if (p.vector_x) {  // E % 8 == 0: the 8 columns lie in one stream, 16-byte aligned
    x = load_lane_inputs(a.x.at(t, h) + d);
    return;
  }
#pragma unroll
  for (int j = 0; j < kLaneColumns; ++j) {
    if (task.column + j < width) x.v[j] = __ldg(a.x.at(t, h) + d);
    if (++d == a.embd) {
      d = 0;
      ++h;
    }
  }
}

// W[k] at the lane's columns as f32; zero past the row width or for k ≥ M.
__device__ __forceinline__ void load_weight_row(const PreLaunch& p, int k, int m,
                                                std::int64_t column, float (&w)[kLaneColumns]) {
  const hc::NormMixArgs& a = p.norm_mix;
  const std::int64_t width = a.n_hc * a.embd;
#pragma unroll
  for (int j = 0; j < kLaneColumns; ++j) w[j] = 0.0f;
  if (k >= m || column >= width) return;
  const std::uint16_t* row = a.weight + k * a.weight_stride + column;
  if (p.vector_w) {  // width % 8 == 0: all 8 columns inside the row, 16-byte aligned
    widen_lane_weights(__ldg(reinterpret_cast<const uint4*>(row)), w);
    return;
  }
#pragma unroll
  for (int j = 0; j < kLaneColumns; ++j) {
    if (column + j < width) w[j] = __half2float(__ushort_as_half(__ldg(row + j)));
  }
}

// The lane's A values for outputs round·32 .. round·32 + 31, all loads issued together.
__device__ __forceinline__ void load_weights(const PreLaunch& p, const SpanTask& task, int round,
                                             int m, LaneWeights& w) {
#pragma unroll
  for (int q = 0; q < kRoundTiles; ++q) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int k = round * kRoundOutputs + q * kTileOutputs + i * 8 + task.g;
      load_weight_row(p, k, m, task.column, w.v[q][i]);
    }
  }
}

// Per-span results of one round, [half][span][output][row], and the span sums of squares.
struct alignas(16) MixScratch {
  float outputs[2][kSpansPerHalf][kRoundOutputs][kPreMaxGroupRows];
  float squares[2][kSpansPerHalf][kPreMaxGroupRows];
};

__device__ __forceinline__ void store_span_outputs(const float (&d)[kRoundTiles][4],
                                                   const SpanTask& task, MixScratch& s) {
#pragma unroll
  for (int q = 0; q < kRoundTiles; ++q) {
    float* upper = &s.outputs[task.half][task.span][q * kTileOutputs + task.g][2 * task.t];
    float* lower = &s.outputs[task.half][task.span][q * kTileOutputs + task.g + 8][2 * task.t];
    *reinterpret_cast<float2*>(upper) = make_float2(d[q][0], d[q][1]);
    *reinterpret_cast<float2*>(lower) = make_float2(d[q][2], d[q][3]);
  }
}

// Σ x² of row g over the span.
__device__ __forceinline__ void store_span_squares(const LaneInputs& x, const SpanTask& task,
                                                   MixScratch& s) {
  const float squares = span_squares(x);
  if (task.t == 0) s.squares[task.half][task.span][task.g] = squares;
}

__device__ __forceinline__ float* partial_slot(const PreLaunch& p, std::int64_t t,
                                               std::int64_t chunk, int slot, int m) {
  return p.partials + ((t * p.chunks + chunk) * 2 + slot) * (m + 1);
}

// Entry `entry` of row t: a whole chunk (first half + second half) or this block's half.
__device__ __forceinline__ void store_partial(const PreLaunch& p, std::int64_t t, int entry, int m,
                                              const float* v, int span_stride) {
  const float first = half_total(v, span_stride);
  if (p.halves_per_block == 2) {
    partial_slot(p, t, blockIdx.x, 0, m)[entry] =
        first + half_total(v + kSpansPerHalf * span_stride, span_stride);
  } else {
    partial_slot(p, t, blockIdx.x / 2, static_cast<int>(blockIdx.x % 2), m)[entry] = first;
  }
}

// Thread 8k + r stores output round·32 + k of row r; threads 0 .. 7 (k = 0) also row r's sum
// of squares.
__device__ __forceinline__ void store_round_partials(const PreLaunch& p, const MixScratch& s,
                                                     int round, int m, RowGroup group) {
  const int k = static_cast<int>(threadIdx.x) / kPreMaxGroupRows;
  const int r = static_cast<int>(threadIdx.x) % kPreMaxGroupRows;
  if (r >= group.rows) return;
  const std::int64_t t = group.t0 + r;
  if (round * kRoundOutputs + k < m) {
    store_partial(p, t, round * kRoundOutputs + k, m, &s.outputs[0][0][k][r],
                  kRoundOutputs * kPreMaxGroupRows);
  }
  if (round == 0 && k == 0) store_partial(p, t, m, m, &s.squares[0][0][r], kPreMaxGroupRows);
}

// The block's partials for one group, round by round (one round for M ≤ 32). W of round 0 is
// already in `w`; with more rounds each is reloaded. Ends with the stores issued.
template <int kFixedN>
__device__ void mix_group(const PreLaunch& p, const SpanTask& task, RowGroup group,
                          const LaneInputs& x, bool first_group, LaneWeights& w, MixScratch& s) {
  const int m = kFixedN > 0 ? hc_mix_width(kFixedN) : p.norm_mix.mix_width;
  const int rounds = (m + kRoundOutputs - 1) / kRoundOutputs;
  const SplitInputs parts = split_inputs(x);
  if (task.active) store_span_squares(x, task, s);
  for (int round = 0; round < rounds; ++round) {
    if (round > 0) __syncthreads();  // the previous round's results are read
    if (task.active) {
      if (rounds > 1 && (round > 0 || !first_group)) load_weights(p, task, round, m, w);
      float d[kRoundTiles][4];
      span_products(w, parts, round * kRoundOutputs + kTileOutputs < m, d);
      store_span_outputs(d, task, s);
    }
    __syncthreads();
    store_round_partials(p, s, round, m, group);
  }
}

// Counts this block in; true for the last block of the group, whose increment also resets the
// counter for the next launch. The barrier orders every thread's partials before thread 0's
// release fence and increment; the last block's acquire fence after the increment orders the
// reads that follow (fence-based release/acquire, PTX memory model; the pattern of cooperative
// groups' grid barrier, with acq_rel fences instead of sequentially consistent ones).
__device__ bool arrive_last(unsigned* counter, unsigned arrivals) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    ::cuda::atomic_thread_fence(::cuda::memory_order_release, ::cuda::thread_scope_device);
    // atomicInc wraps to 0 after arrivals − 1: the last arrival resets the counter itself.
    const bool is_last = atomicInc(counter, arrivals - 1u) == arrivals - 1u;
    if (is_last)
      ::cuda::atomic_thread_fence(::cuda::memory_order_acquire, ::cuda::thread_scope_device);
    last = is_last;
  }
  __syncthreads();
  return last;
}

// Chunk c's entries e0 .. e0 + kEntries − 1 of row t (those ≤ M), each the chunk's first slot
// plus, when each half had its own block, its second slot (as store_partial adds them), added
// to total[q]. kHoisted (half-chunk blocks, small T) issues all loads before the first
// addition, from addresses clamped into the workspace: with the loads under the entry and slot
// conditions they go out one L2 round trip after another. Whole chunks (large T) keep the
// conditional loop, which measures faster there (docs/hc.md, "Tried, not kept"). Both add the
// same values in the same order.
template <bool kHoisted, int kEntries>
__device__ __forceinline__ void add_chunk(const PreLaunch& p, std::int64_t t, int c, int e0, int m,
                                          float (&total)[kEntries]) {
  const float* slot = partial_slot(p, t, c, 0, m);
  if constexpr (kHoisted) {
    float first[kEntries];
    float second[kEntries];
#pragma unroll
    for (int q = 0; q < kEntries; ++q) {
      const int e = min(e0 + q, m);
      first[q] = __ldcg(slot + e);
      second[q] = __ldcg(slot + m + 1 + e);
    }
#pragma unroll
    for (int q = 0; q < kEntries; ++q) total[q] += first[q] + second[q];
  } else {
#pragma unroll
    for (int q = 0; q < kEntries; ++q) {
      if (e0 + q <= m) {
        const float first = __ldcg(slot + e0 + q);
        total[q] += p.halves_per_block == 2 ? first : first + __ldcg(slot + m + 1 + e0 + q);
      }
    }
  }
}

// Combines the partials of the group's rows into totals[r][k] (k ≤ M, the last the sum of
// squares). A warp takes kEntries consecutive entries of one row: lane l adds chunks
// l, l + 32, … in order, then the butterfly adds the lanes (how entries are grouped does not
// change a sum). kHoisted: each half chunk had its own block (two slots per chunk); its items
// are small, so that a single row's entries spread over the warps with few registers. Ends
// synchronised.
template <bool kHoisted>
__device__ void combine_partials(const PreLaunch& p, RowGroup group, int m,
                                 float (*totals)[kSplitStride + 1]) {
  constexpr int kEntries = kHoisted ? kHoistedEntries : kCombineEntries;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int row_items = (m + kEntries) / kEntries;  // ⌈(M + 1) / entries⌉
  for (int item = warp; item < group.rows * row_items; item += kRowWarps) {
    const int r = item / row_items;
    const int e0 = item % row_items * kEntries;
    float total[kEntries] = {};
#pragma unroll 2
    for (int c = lane; c < p.chunks; c += kWarpSize) {
      add_chunk<kHoisted, kEntries>(p, group.t0 + r, c, e0, m, total);
    }
#pragma unroll
    for (int q = 0; q < kEntries; ++q) {
      const float sum = warp_sum(total[q]);
      if (lane == 0 && e0 + q <= m) totals[r][e0 + q] = sum;
    }
  }
  __syncthreads();
}

// mix = ρ·totals for the group's rows, into shared mix_rows and the mix output. Ends
// synchronised.
__device__ void write_mix_rows(const hc::NormMixArgs& a, RowGroup group, int m,
                               const float (*totals)[kSplitStride + 1],
                               float (*mix_rows)[kSplitStride]) {
  for (int e = threadIdx.x; e < group.rows * m; e += kRowThreads) {
    const int r = e / m;
    const int k = e % m;
    const float v = mix_output(a, totals[r][k], totals[r][m]);
    mix_rows[r][k] = v;
    a.mix.row(group.t0 + r)[k] = v;
  }
  __syncthreads();
}

// The last block's work for a group: mix, then for HC-pre split, collapse and RMSNorm.
template <bool kFull, int kFixedN, bool kHalfBlocks>
__device__ void finish_group(const PreLaunch& p, RowGroup group) {
  __shared__ float totals[kPreMaxGroupRows][kSplitStride + 1];
  __shared__ float mix_rows[kPreMaxGroupRows][kSplitStride];
  const int m = kFixedN > 0 ? hc_mix_width(kFixedN) : p.norm_mix.mix_width;
  combine_partials<kHalfBlocks>(p, group, m, totals);
  write_mix_rows(p.norm_mix, group, m, totals, mix_rows);
  if constexpr (kFull) {
    __shared__ float split_rows[kPreMaxGroupRows][kSplitStride];
    __shared__ float scratch[kRowWarps];
    const hc::SplitCollapseArgs& sc = p.split_collapse;
    split_rows_block<kFixedN>(sc.split, &mix_rows[0][0], kSplitStride, group.t0, group.rows,
                              &split_rows[0][0]);
    for (int r = 0; r < group.rows; ++r) {
      collapse_norm_row_block<kFixedN, kPreCachedQuads>(sc.collapse, sc.norm, split_rows[r],
                                                        group.t0 + r, scratch);
    }
  }
}

// kFull: HC-pre (else norm-mix only); kFixedN as for split_rows_block (0: any n). Block
// (x, y) covers half or chunk x for the groups y·G .. y·G + G − 1 (G = groups_per_block),
// starting at a group that depends on x so that different blocks tend to arrive last at
// different groups. x is loaded two groups ahead of the one being computed. The groups this
// block completed are finished after its last group, when none of the mix loop's registers
// are live any more. kHalfBlocks: p.halves_per_block == 1 (small T), whose combine is hoisted
// (add_chunk); an instance of its own, so the whole-chunk kernel keeps its conditional loop.
template <bool kFull, int kFixedN, bool kHalfBlocks>
__global__ void __launch_bounds__(kRowThreads, 2) pre_kernel(const PreLaunch p) {
  __shared__ MixScratch scratch;
  const int m = kFixedN > 0 ? hc_mix_width(kFixedN) : p.norm_mix.mix_width;
  const SpanTask task = span_task(p);
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * p.groups_per_block;
  const int count = static_cast<int>(p.groups - first < p.groups_per_block ? p.groups - first
                                                                           : p.groups_per_block);
  const int rotation = static_cast<int>(blockIdx.x % static_cast<unsigned>(count));
  const auto nth_group = [&](int j) { return row_group(p, first + (j + rotation) % count); };
  LaneWeights w = {};
  LaneInputs ahead[2] = {};  // x of the next two groups
  if (task.active) {
    load_weights(p, task, 0, m, w);
    load_inputs(p, task, nth_group(0), ahead[0]);
    if (count > 1) load_inputs(p, task, nth_group(1), ahead[1]);
  }
  unsigned completed = 0;  // bit i: this block arrived last at group first + i
  for (int j = 0; j < count; ++j) {
    const LaneInputs x = ahead[0];
    ahead[0] = ahead[1];
    if (task.active && j + 2 < count) load_inputs(p, task, nth_group(j + 2), ahead[1]);
    const RowGroup group = nth_group(j);
    mix_group<kFixedN>(p, task, group, x, j == 0, w, scratch);
    const int i = (j + rotation) % count;
    if (arrive_last(p.counters + first + i, gridDim.x)) completed |= 1u << i;
  }
  for (int i = 0; i < count; ++i) {
    if (completed & (1u << i)) {
      finish_group<kFull, kFixedN, kHalfBlocks>(p, row_group(p, first + i));
    }
  }
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

PreLaunch make_launch(const HcPrePlan& plan, const hc::NormMixArgs& args, void* workspace) {
  PreLaunch p;
  p.norm_mix = args;
  p.chunks = plan.chunks;
  p.partials = static_cast<float*>(workspace);
  p.counters = reinterpret_cast<unsigned*>(
      static_cast<char*>(workspace) +
      hc::pre_partials_bytes(plan.max_rows, plan.chunks, args.mix_width));
  // Schedule from T (never changes a row's result): small batches take small groups (a short
  // tail per group) and split chunks in halves until there are enough blocks; large batches
  // take tiles of 8 rows and run each block's columns for kBandGroups groups (W read once).
  p.group_rows = args.rows > kSmallBatchRows ? hc::kPreMaxGroupRows : hc::kPreGroupRows;
  p.groups = (args.rows + p.group_rows - 1) / p.group_rows;
  p.halves_per_block = std::int64_t{p.chunks} * p.groups < kHalfBlocksBelow ? 1 : 2;
  const std::int64_t column_blocks = std::int64_t{p.chunks} * 2 / p.halves_per_block;
  p.groups_per_block =
      p.groups >= 4 * kBandGroups && column_blocks >= 2 * kBandGroups ? kBandGroups : 1;
  p.vector_x = args.embd % 8 == 0 && aligned16(args.x.data) && args.x.row_stride % 4 == 0 &&
               args.x.stream_stride % 4 == 0;
  p.vector_w =
      args.n_hc * args.embd % 8 == 0 && aligned16(args.weight) && args.weight_stride % 8 == 0;
  return p;
}

dim3 pre_grid(const PreLaunch& p) {
  const std::int64_t bands = (p.groups + p.groups_per_block - 1) / p.groups_per_block;
  return dim3(static_cast<unsigned>(std::int64_t{p.chunks} * 2 / p.halves_per_block),
              static_cast<unsigned>(bands));
}

// The instance for p's n_hc (4: compiled for n = 4) and chunk split.
template <bool kFull>
void launch_pre(const PreLaunch& p, Stream stream) {
  const bool n4 = p.norm_mix.n_hc == 4;
  const bool halves = p.halves_per_block == 1;
  const auto kernel = n4 ? (halves ? pre_kernel<kFull, 4, true> : pre_kernel<kFull, 4, false>)
                         : (halves ? pre_kernel<kFull, 0, true> : pre_kernel<kFull, 0, false>);
  kernel<<<pre_grid(p), kRowThreads, 0, native(stream)>>>(p);
}

}  // namespace

void norm_mix_on_grid(const HcPrePlan& plan, const hc::NormMixArgs& args, void* workspace,
                      Stream stream) {
  launch_pre<false>(make_launch(plan, args, workspace), stream);
  TD_CUDA_CHECK_LAUNCH("pre_kernel<norm-mix>");
}

void pre_on_grid(const HcPrePlan& plan, const hc::PreArgs& args, void* workspace, Stream stream) {
  PreLaunch p = make_launch(plan, args.norm_mix, workspace);
  p.split_collapse = args.split_collapse;
  launch_pre<true>(p, stream);
  TD_CUDA_CHECK_LAUNCH("pre_kernel<hc-pre>");
}

}  // namespace turbodecode::cuda
