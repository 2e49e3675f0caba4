// norm-mix and HC-pre on thread-block clusters: one cluster of 16 thread blocks per group of
// up to kRows rows (1, or 8: one tensor-core tile of rows), exchanging partial results through
// distributed shared memory instead of global memory and a completion counter (docs/hc.md,
// "The small-T clusters"). Compiled for n_hc = 4 and rows of up to 80 chunks (E ≤ 5120) with
// 16-byte aligned x and W; other problems take the grid kernel (grid.cu).
//
// Block b of a cluster computes chunks b, b + 16, … of its rows, the two halves of a chunk by
// its 8 warps, one span each, with every load of the launch issued at the start: W, x, and for
// the later steps the collapse's x quads and the RMSNorm weights. Each block then pushes its
// chunk totals into the blocks that need them (once every block of the cluster has started):
// all of them into block 15, those of the stream weights into the blocks that collapse the row.
// After a cluster barrier block 15 adds them up, writes the mix rows and, four lanes per row,
// runs the Sinkhorn and writes the split rows. For HC-pre the collapse is cut into tasks of one
// slab of 1024 elements of one row, task j on block j mod 15: a slab block adds up the stream
// weights of its rows, collapses its slabs and pushes them into the shared memory of the row's
// norm block (block r for row r of the group), which after a second barrier runs the RMSNorm.
// Block 15 arrives at that barrier before its Sinkhorn, so the RMSNorm never waits for it.
//
// The arithmetic is the grid kernel's (spans.cuh, hc_rows.cuh): the same MMAs per span, the
// same orders for spans, halves, chunks and rows (combine_entry: the grid kernel's lane sums
// and butterfly), the thread-to-quad map of the standalone collapse + RMSNorm routine,
// and hc_split_row<4>'s float operations (split_row4_lanes). A row's results are bitwise those
// of the grid kernel and of the unfused operators, whatever the group size.
#include <cooperative_groups.h>

#include <cstdint>

#include "common/cuda/cluster_launch.cuh"
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dependent_launch.cuh"
#include "hc/cuda/hc_rows.cuh"
#include "hc/cuda/pre/clusters.cuh"
#include "hc/cuda/pre/launch.h"
#include "hc/cuda/pre/spans.cuh"

namespace turbodecode::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kClusterBlocks = 16;  // a non-portable cluster size (allowed on Hopper)
constexpr int kBlockChunks = 5;     // chunks per block: rows of up to 16 · 5 · 256 = 20480 values
constexpr int kClusterN = hc::kClusterN;  // M = 24: one round of outputs
constexpr int kClusterM = hc_mix_width(kClusterN);
constexpr int kEntries = kClusterM + 1;  // the M outputs and the sum of squares
constexpr int kSlabElements = kQuad * kRowThreads;
constexpr int kMaxSlabs = 5;  // E ≤ 5 · 1024
constexpr int kSplitBlock = kClusterBlocks - 1;
constexpr int kSlabBlocks = kSplitBlock;  // blocks 0 .. 14 take the collapse tasks
using hc::kPreMaxGroupRows;
static_assert(kPreMaxGroupRows <= 8 && kPreMaxGroupRows <= kSlabBlocks,
              "a group is one MMA column tile, and its rows' norm blocks are slab blocks");
static_assert(kRowWarps == 2 * kSpansPerHalf, "a block's warps: two halves of four spans");
static_assert(kClusterM == kTileOutputs + 8, "W rows g, g + 8 and 16 + g are the outputs");
static_assert(kBlockChunks * kClusterBlocks * hc::kPreChunkWidth ==
                      kClusterN * kMaxSlabs * kSlabElements &&
                  kMaxSlabs * kSlabElements == kClusterMaxEmbd,
              "the spans and the slabs cover the widest row the cluster kernels take");

// Collapse tasks (row, slab) one block takes at most.
template <int kRows>
inline constexpr int kBlockTasks = (kRows * kMaxSlabs + kSlabBlocks - 1) / kSlabBlocks;

struct ClusterLaunch {
  hc::NormMixArgs norm_mix;
  hc::SplitCollapseArgs split_collapse;  // read only by HC-pre
  int chunks = 0;
  int slabs = 0;  // ⌈E / 1024⌉
};

template <int kRows>
struct ClusterShared {
  float spans[kBlockChunks][2][kSpansPerHalf][kRows][kEntries];  // this block's span results
  // Every block's chunk totals, [block][i][row] for chunk block + 16 i, pushed by their blocks
  // into the blocks that need them (remote loads in the combine are slower: docs/hc.md, "Tried,
  // not kept").
  float chunks[kClusterBlocks][kBlockChunks][kRows][kEntries];
  float totals[kRows][kEntries];
  float mix[kRows][kClusterM];
  float split[kRows][kClusterM];
  float scratch[kRowWarps];
  alignas(16) float collapsed[kMaxSlabs * kSlabElements];  // a norm block: its collapsed row
};

// Everything a thread loads from global memory, issued before the first use.
template <int kRows>
struct ThreadLoads {
  uint4 weights[kBlockChunks][3];  // W rows g, g + 8 and 16 + g at the lane's span columns
  LaneInputs x[kBlockChunks];      // row g of the MMA's B (rows of the group), zero elsewhere
  Quad streams[kBlockTasks<kRows>][kClusterN];  // the collapse tasks' x quads
  Quad norm_weight[kMaxSlabs];                  // the RMSNorm weights of the thread's quads
  float pre_scale = 0.0f;
  float pre_base[kClusterN] = {};
};

// Collapse task j of a group: row j / slabs, slab j mod slabs, on block j mod kSlabBlocks.
struct SlabTask {
  int row;
  int slab;
};

template <int kRows>
__device__ __forceinline__ SlabTask slab_task(const ClusterLaunch& p, int j) {
  if constexpr (kRows == 1) return {0, j};  // no division on the single-row path
  return {j / p.slabs, j % p.slabs};
}

// Task u of block b is task b + u · kSlabBlocks of the group, if the group has it.
__device__ __forceinline__ bool has_task(const ClusterLaunch& p, RowGroup group, int block, int u) {
  return block < kSlabBlocks && block + u * kSlabBlocks < group.count * p.slabs;
}

// Rows are at most 20480 values wide: columns fit in 32 bits.
__device__ __forceinline__ int span_column(int block, int i) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int chunk = block + i * kClusterBlocks;
  return chunk * hc::kPreChunkWidth + warp / kSpansPerHalf * kHalfWidth +
         warp % kSpansPerHalf * kSpanWidth + lane % 4 * kLaneColumns;
}

// Whether the block's chunk i exists and the lane's span column lies inside the row.
__device__ __forceinline__ bool span_inside(const ClusterLaunch& p, int block, int i, int column) {
  return block + i * kClusterBlocks < p.chunks &&
         column < kClusterN * static_cast<int>(p.norm_mix.embd);
}

__device__ __forceinline__ std::int64_t slab_element(int slab) {
  return static_cast<std::int64_t>(slab) * kSlabElements + kQuad * threadIdx.x;
}

// The thread's parameter loads: W, the split's scale and base, the RMSNorm weights. No kernel of
// a layer's chain writes them, so they are issued before the kernel waits for the one before it.
template <bool kFull, int kRows>
__device__ void issue_parameter_loads(const ClusterLaunch& p, int block, RowGroup group,
                                      ThreadLoads<kRows>& l) {
  const hc::NormMixArgs& a = p.norm_mix;
  const int g = static_cast<int>(threadIdx.x) % kWarpSize / 4;
  const std::uint16_t* weight_rows[3];  // rows g, g + 8, 16 + g
#pragma unroll
  for (int r = 0; r < 3; ++r)
    weight_rows[r] = a.weight + (r < 2 ? g + 8 * r : kTileOutputs + g) * a.weight_stride;
#pragma unroll
  for (int i = 0; i < kBlockChunks; ++i) {
    const int column = span_column(block, i);
    const bool inside = span_inside(p, block, i, column);
#pragma unroll
    for (int r = 0; r < 3; ++r) {
      l.weights[i][r] =
          inside ? __ldg(reinterpret_cast<const uint4*>(weight_rows[r] + column)) : uint4{};
    }
  }
  if constexpr (kFull) {
    const hc::SplitCollapseArgs& sc = p.split_collapse;
    if (has_task(p, group, block, 0)) {
      l.pre_scale = __ldg(sc.split.scale);
#pragma unroll
      for (int h = 0; h < kClusterN; ++h) l.pre_base[h] = __ldg(sc.split.base + h);
    }
    if (block < group.count) {  // the norm block of row `block`
#pragma unroll
      for (int j = 0; j < kMaxSlabs; ++j) {
        const std::int64_t e = slab_element(j);
        l.norm_weight[j] =
            j < p.slabs && e < a.embd ? load_quad<true>(sc.norm.weight, e, a.embd) : Quad{};
      }
    }
  }
}

// The thread's input loads: the rows' x (the kernel before may have written it).
template <bool kFull, int kRows>
__device__ void issue_input_loads(const ClusterLaunch& p, int block, RowGroup group,
                                  ThreadLoads<kRows>& l) {
  const hc::NormMixArgs& a = p.norm_mix;
  const int g = static_cast<int>(threadIdx.x) % kWarpSize / 4;
  const int embd = static_cast<int>(a.embd);
#pragma unroll
  for (int i = 0; i < kBlockChunks; ++i) {
    const int column = span_column(block, i);
    const bool inside = span_inside(p, block, i, column);
    // The span's stream (n = 4): comparisons instead of a division.
    const int h = (column >= embd) + (column >= 2 * embd) + (column >= 3 * embd);
    const int row = span_input_row<kRows>(g, group.count);
    l.x[i] = inside && row >= 0
                 ? load_lane_inputs(a.x.at(group.first + row, h) + (column - h * embd))
                 : LaneInputs{};
  }
  if constexpr (kFull) {
    const hc::SplitCollapseArgs& sc = p.split_collapse;
#pragma unroll
    for (int u = 0; u < kBlockTasks<kRows>; ++u) {
      if (!has_task(p, group, block, u)) break;
      const SlabTask task = slab_task<kRows>(p, block + u * kSlabBlocks);
      const std::int64_t d = slab_element(task.slab);
      if (d < a.embd) load_stream_quads(sc.collapse, group.first + task.row, d, l.streams[u]);
    }
  }
}

// The block's span results, then its chunk totals (a chunk: first half + second half), pushed
// into block 15 and, for HC-pre, the stream weights' ones into the row's slab blocks.
template <bool kFull, int kRows>
__device__ void push_chunk_totals(const ClusterLaunch& p, cg::cluster_group& cluster, int block,
                                  RowGroup group, const ThreadLoads<kRows>& l,
                                  ClusterShared<kRows>& s) {
  constexpr int kSpanStride = kRows * kEntries;  // between spans
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int half = warp / kSpansPerHalf;
  const int span = warp % kSpansPerHalf;
#pragma unroll
  for (int i = 0; i < kBlockChunks; ++i) {
    if (block + i * kClusterBlocks >= p.chunks) break;
    store_span_entries<kRows>(l.weights[i], l.x[i], s.spans[i][half][span]);
  }
  __syncthreads();
  // Pairs with the kernel's first arrival: no block writes into another before that one has
  // started (compute-sanitizer's racecheck flags such writes).
  cluster.barrier_wait();
  for (int e = threadIdx.x; e < kBlockChunks * kSpanStride; e += kRowThreads) {
    const int i = e / kSpanStride;
    const int row = e / kEntries % kRows;
    const int k = e % kEntries;
    if (block + i * kClusterBlocks >= p.chunks || row >= group.count) continue;
    const float total = half_total(&s.spans[i][0][0][row][k], kSpanStride) +
                        half_total(&s.spans[i][1][0][row][k], kSpanStride);
    *cluster.map_shared_rank(&s.chunks[block][i][row][k], kSplitBlock) = total;
    if (kFull && (k < kClusterN || k == kClusterM)) {  // the stream weights' logits, ρ
      for (int slab = 0; slab < p.slabs; ++slab) {
        const int b = (row * p.slabs + slab) % kSlabBlocks;
        *cluster.map_shared_rank(&s.chunks[block][i][row][k], b) = total;
      }
    }
  }
}

// Entry k of group row `row` from every block's chunk totals (chunk c from block c mod 16).
template <int kRows>
__device__ __forceinline__ float combine_entry(const ClusterLaunch& p,
                                               const ClusterShared<kRows>& s, int row, int k) {
  return combine_in_lane_order(
      p.chunks, [&](int c) { return s.chunks[c % kClusterBlocks][c / kClusterBlocks][row][k]; });
}

// Block 15: the mix rows, and for HC-pre the split rows (four lanes of warp 0 per row run the
// Sinkhorn).
template <bool kFull, int kRows>
__device__ void write_mix_and_split(const ClusterLaunch& p, RowGroup group,
                                    ClusterShared<kRows>& s) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < group.count * kEntries)
    s.totals[tid / kEntries][tid % kEntries] = combine_entry(p, s, tid / kEntries, tid % kEntries);
  __syncthreads();
  if (tid < group.count * kClusterM) {
    const int row = tid / kClusterM;
    const int k = tid % kClusterM;
    const float mix = mix_output(p.norm_mix, s.totals[row][k], s.totals[row][kClusterM]);
    s.mix[row][k] = mix;
    p.norm_mix.mix.row(group.first + row)[k] = mix;
  }
  if constexpr (kFull) {
    __syncthreads();
    if (tid >= kWarpSize) return;
    const hc::SplitArgs& split = p.split_collapse.split;
    const int row = tid / 4;
    const int source = min(row, group.count - 1);  // quads past the group repeat its last row
    split_row4_lanes(s.mix[source], split.scale, split.base, split.iters, split.eps,
                     s.split[source], row < group.count);
    __syncwarp();
    for (int e = tid; e < group.count * kClusterM; e += kWarpSize) {
      split.split.row(group.first + e / kClusterM)[e % kClusterM] =
          s.split[e / kClusterM][e % kClusterM];
    }
  }
}

// A slab block: the stream weights of its tasks' rows, its slabs collapsed and pushed to their
// rows' norm blocks. Leaves the collapsed quads in u (the caller stores them after arriving at
// the barrier, whose release then does not wait for the global stores).
template <int kRows>
__device__ void collapse_tasks(const ClusterLaunch& p, cg::cluster_group& cluster, int block,
                               RowGroup group, const ThreadLoads<kRows>& l, ClusterShared<kRows>& s,
                               Quad (&u)[kBlockTasks<kRows>]) {
  constexpr int kWeightEntries = kClusterN + 1;  // the logits' totals and the sum of squares
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kBlockTasks<kRows> * kWeightEntries &&
      has_task(p, group, block, tid / kWeightEntries)) {
    const int row = slab_task<kRows>(p, block + tid / kWeightEntries * kSlabBlocks).row;
    const int k = tid % kWeightEntries < kClusterN ? tid % kWeightEntries : kClusterM;
    s.totals[row][k] = combine_entry(p, s, row, k);
  }
  __syncthreads();
  const hc::SplitCollapseArgs& sc = p.split_collapse;
#pragma unroll
  for (int q = 0; q < kBlockTasks<kRows>; ++q) {
    u[q] = {};
    if (!has_task(p, group, block, q)) continue;
    const SlabTask task = slab_task<kRows>(p, block + q * kSlabBlocks);
    const std::int64_t d = slab_element(task.slab);
    if (d >= sc.collapse.embd) continue;
    float pre[kClusterN];
#pragma unroll
    for (int h = 0; h < kClusterN; ++h) {
      const float mix =
          mix_output(p.norm_mix, s.totals[task.row][h], s.totals[task.row][kClusterM]);
      pre[h] = hc_pre_weight(fmaf(mix, l.pre_scale, l.pre_base[h]), sc.split.eps);
    }
    u[q] = collapse_stream_quads(pre, l.streams[q]);
    float* collapsed = cluster.map_shared_rank(s.collapsed, task.row);
    *reinterpret_cast<float4*>(collapsed + d) =
        make_float4(u[q].v[0], u[q].v[1], u[q].v[2], u[q].v[3]);
  }
}

// A norm block, with its row's collapsed values in its shared memory: the RMSNorm, thread i over
// its quads in slab order (collapse_norm_cached's order).
template <int kRows>
__device__ void norm_row(const ClusterLaunch& p, std::int64_t row, const ThreadLoads<kRows>& l,
                         ClusterShared<kRows>& s) {
  const hc::RmsNormArgs& norm = p.split_collapse.norm;
  const std::int64_t e = norm.embd;
  Quad u[kMaxSlabs];
  float squares = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxSlabs; ++j) {
    const std::int64_t d = slab_element(j);
    if (j < p.slabs && d < e) {
      const float4 v = *reinterpret_cast<const float4*>(s.collapsed + d);
      u[j] = {{v.x, v.y, v.z, v.w}};
      squares = add_quad_squares(u[j], d, e, squares);
    }
  }
  const float scale = hc_rms_scale(block_sum(squares, s.scratch), e, norm.eps);
  float* normed = norm.out.row(row);
#pragma unroll
  for (int j = 0; j < kMaxSlabs; ++j) {
    const std::int64_t d = slab_element(j);
    if (j < p.slabs && d < e)
      store_quad(normed, d, e, rms_apply_quad(u[j], scale, l.norm_weight[j]));
  }
}

// kFull: HC-pre, else norm-mix only. Grid (16, ⌈T / kRows⌉), clusters of 16 blocks along x: one
// per group of kRows rows.
template <bool kFull, int kRows>
__global__ void __launch_bounds__(kRowThreads, 1) cluster_pre_kernel(const ClusterLaunch p) {
  extern __shared__ __align__(16) unsigned char shared[];
  auto& s = *reinterpret_cast<ClusterShared<kRows>*>(shared);
  cg::cluster_group cluster = cg::this_cluster();
  const int block = static_cast<int>(cluster.block_rank());
  const RowGroup group = cluster_row_group(p.norm_mix.rows, kRows);
  // The launch may overlap the kernel before (only parameters are read before that completes),
  // and the kernel after may start on the SMs the cluster leaves idle.
  allow_dependent_grids();
  ThreadLoads<kRows> loads;
  issue_parameter_loads<kFull>(p, block, group, loads);
  wait_for_prior_grids();
  issue_input_loads<kFull>(p, block, group, loads);
  arrive_started();
  push_chunk_totals<kFull>(p, cluster, block, group, loads, s);
  cluster.sync();  // every block's chunk totals have arrived
  // Orders this block's own pushes (generic stores by other threads) before the reads for
  // compute-sanitizer's racecheck, which does not count the cluster barrier as ordering them.
  __syncthreads();
  if (block == kSplitBlock) {
    // Arrives first: the barrier below then waits only for the collapse, not the Sinkhorn.
    cluster.barrier_arrive();
    write_mix_and_split<kFull>(p, group, s);
    cluster.barrier_wait();  // no block leaves while another may still write to it
    return;
  }
  if constexpr (kFull) {
    Quad u[kBlockTasks<kRows>];
    collapse_tasks(p, cluster, block, group, loads, s, u);
    cluster.barrier_arrive();  // releases the pushed slabs
    const hc::CollapseArgs& collapse = p.split_collapse.collapse;
#pragma unroll
    for (int q = 0; q < kBlockTasks<kRows>; ++q) {
      if (!has_task(p, group, block, q)) break;
      const SlabTask task = slab_task<kRows>(p, block + q * kSlabBlocks);
      const std::int64_t d = slab_element(task.slab);
      if (d < collapse.embd)
        store_quad(collapse.out.row(group.first + task.row), d, collapse.embd, u[q]);
    }
    cluster.barrier_wait();  // a norm block: every slab of its row has arrived
    if (block < group.count) norm_row(p, group.first + block, loads, s);
  } else {
    cluster.barrier_arrive();
    cluster.barrier_wait();
  }
}

// Clusters of 16 blocks along x, one per group of kRows rows; a dependent launch.
template <int kRows>
cudaLaunchConfig_t cluster_config(std::int64_t rows, Stream stream,
                                  cudaLaunchAttribute (&attributes)[2]) {
  return cluster_launch_config(rows, kRows, kClusterBlocks, kRowThreads,
                               sizeof(ClusterShared<kRows>), native(stream), attributes);
}

template <bool kFull, int kRows>
int resident_groups() {
  cudaLaunchAttribute attributes[2];
  return resident_clusters<cluster_pre_kernel<kFull, kRows>>(
      cluster_config<kRows>(1, Stream{}, attributes));
}

template <bool kFull, int kRows>
void launch_groups(const ClusterLaunch& p, std::int64_t rows, Stream stream) {
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config = cluster_config<kRows>(rows, stream, attributes);
  TD_CUDA_CHECK((allow_cluster_kernel<cluster_pre_kernel<kFull, kRows>>(config.dynamicSmemBytes)));
  TD_CUDA_CHECK(cudaLaunchKernelEx(&config, cluster_pre_kernel<kFull, kRows>, p));
}

template <bool kFull>
void launch(const ClusterLaunch& p, std::int64_t rows, int rows_per_cluster, Stream stream) {
  if (rows_per_cluster == 1) {
    launch_groups<kFull, 1>(p, rows, stream);
  } else {
    launch_groups<kFull, kPreMaxGroupRows>(p, rows, stream);
  }
}

ClusterLaunch make_launch(const hc::NormMixArgs& args) {
  ClusterLaunch p;
  p.norm_mix = args;
  p.chunks = static_cast<int>(hc::pre_chunks(args.n_hc * args.embd));
  p.slabs = static_cast<int>((args.embd + kSlabElements - 1) / kSlabElements);
  return p;
}

}  // namespace

int cluster_small_t_residency(bool full, int rows_per_cluster) {
  if (rows_per_cluster == 1) return full ? resident_groups<true, 1>() : resident_groups<false, 1>();
  return full ? resident_groups<true, kPreMaxGroupRows>()
              : resident_groups<false, kPreMaxGroupRows>();
}

void norm_mix_on_cluster_small_t(const hc::NormMixArgs& args, int rows_per_cluster, Stream stream) {
  launch<false>(make_launch(args), args.rows, rows_per_cluster, stream);
}

void pre_on_cluster_small_t(const hc::PreArgs& args, int rows_per_cluster, Stream stream) {
  ClusterLaunch p = make_launch(args.norm_mix);
  p.split_collapse = args.split_collapse;
  launch<true>(p, args.norm_mix.rows, rows_per_cluster, stream);
}

}  // namespace turbodecode::cuda
