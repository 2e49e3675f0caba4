// norm-mix and HC-pre for a few rows: one cluster of 16 thread blocks per row, exchanging partial
// results through distributed shared memory instead of global memory and a completion counter
// (docs/hc.md, "HC-pre on a cluster"). Compiled for n_hc = 4 and rows of up to 80 chunks
// (E ≤ 5120) with 16-byte aligned x and W; other problems take the grid kernel (hc_pre.cu).
//
// Block b of a cluster computes chunks b, b + 16, … of its row, the two halves of a chunk by its
// 8 warps, one span each, with every load of the launch issued at the start: W, x, and for the
// later steps the collapse's x quads and the RMSNorm weights. Each block then pushes its chunk
// totals into the blocks that need the mix (once every block of the cluster has started), and
// after a cluster barrier those add them up. Blocks 0 .. S − 1 (S = ⌈E / 1024⌉) collapse one
// slab of 256 quads each and push it into block 0's shared memory; block 15 writes the mix row
// and, on four lanes, runs the Sinkhorn and writes the split row; after a second barrier block 0
// finishes the RMSNorm. Block 15 arrives at that barrier before its Sinkhorn, so the RMSNorm
// never waits for it.
//
// The arithmetic is the grid kernel's (pre_spans.cuh, hc_rows.cuh): the same MMAs per span, the
// same orders for spans, halves, chunks and rows, the thread-to-quad map of the standalone
// collapse + RMSNorm routine, and hc_split_row<4>'s float operations (split_row4_lanes). A
// row's results are bitwise those of the grid kernel and of the unfused operators.
#include <cooperative_groups.h>

#include <cstdint>
#include <mutex>

#include "common/cuda_check.cuh"
#include "common/dependent_launch.cuh"
#include "hc/cuda/hc_pre_cluster.h"
#include "hc/cuda/hc_rows.cuh"
#include "hc/cuda/pre_spans.cuh"

namespace turbodecode::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kClusterBlocks = 16;  // a non-portable cluster size (allowed on Hopper)
constexpr int kBlockChunks = 5;     // chunks per block: rows of up to 16 · 5 · 256 = 20480 values
constexpr int kClusterN = 4;        // compiled for n_hc = 4 (M = 24: one round of outputs)
constexpr int kClusterM = hc_mix_width(kClusterN);
constexpr int kEntries = kClusterM + 1;  // the M outputs and the sum of squares
constexpr int kSlabElements = kQuad * kRowThreads;
constexpr int kMaxSlabs = 5;  // E ≤ 5 · 1024
constexpr int kSplitBlock = kClusterBlocks - 1;
constexpr int kCombineLoads = 3;  // chunks per lane in the combine: ⌈80 / 32⌉
static_assert(kRowWarps == 2 * kSpansPerHalf, "a block's warps: two halves of four spans");
static_assert(kClusterM == kTileOutputs + 8, "W rows g, g + 8 and 16 + g are the outputs");
static_assert(kMaxSlabs < kSplitBlock, "the Sinkhorn block collapses nothing");
static_assert(kBlockChunks * kClusterBlocks * hc::kPreChunkWidth ==
                  kClusterN * kMaxSlabs * kSlabElements,
              "the row widths the spans and the slabs cover agree");

struct ClusterLaunch {
  hc::NormMixArgs norm_mix;
  hc::SplitCollapseArgs split_collapse;  // read only by HC-pre
  int chunks = 0;
  int slabs = 0;  // ⌈E / 1024⌉
};

struct ClusterShared {
  float spans[kBlockChunks][2][kSpansPerHalf][kEntries];  // this block's span results
  // Every block's chunk totals, [block][i] for chunk block + 16 i, pushed by their blocks into
  // the blocks that need the mix. (With remote loads in the combine instead, norm-mix took 8.8
  // rather than 5.4 µs at T = 1, H200.)
  float chunks[kClusterBlocks][kBlockChunks][kEntries];
  float totals[kEntries];
  float mix[kSplitStride];
  float split[kSplitStride];
  float scratch[kRowWarps];
  alignas(16) float collapsed[kMaxSlabs * kSlabElements];  // block 0: the collapsed row
};

// Everything a thread loads from global memory, issued before the first use.
struct ThreadLoads {
  uint4 weights[kBlockChunks][3];  // W rows g, g + 8 and 16 + g at the lane's span columns
  LaneInputs x[kBlockChunks];      // row 0 of the MMA's B (lanes g = 0), zero elsewhere
  Quad streams[kClusterN];         // the collapse slab's x quads (slab blocks)
  Quad norm_weight[kMaxSlabs];     // the RMSNorm weights of the thread's quads (block 0)
  float pre_scale = 0.0f;
  float pre_base[kClusterN] = {};
};

// Rows are at most 20480 values wide: columns fit in 32 bits.
__device__ __forceinline__ int span_column(int block, int i) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int chunk = block + i * kClusterBlocks;
  return chunk * hc::kPreChunkWidth + warp / kSpansPerHalf * kHalfWidth +
         warp % kSpansPerHalf * kSpanWidth + lane % 4 * kLaneColumns;
}

// Whether block b needs the row's mix: the Sinkhorn block, and for HC-pre the slab blocks.
template <bool kFull>
__device__ __forceinline__ bool needs_mix(const ClusterLaunch& p, int b) {
  return b == kSplitBlock || (kFull && b < p.slabs);
}

__device__ __forceinline__ std::int64_t slab_element(int slab) {
  return static_cast<std::int64_t>(slab) * kSlabElements + kQuad * threadIdx.x;
}

template <bool kFull>
__device__ void issue_loads(const ClusterLaunch& p, int block, std::int64_t row, ThreadLoads& l) {
  const hc::NormMixArgs& a = p.norm_mix;
  const int g = static_cast<int>(threadIdx.x) % kWarpSize / 4;
  const int embd = static_cast<int>(a.embd);
  const std::uint16_t* weight_rows[3];  // rows g, g + 8, 16 + g
#pragma unroll
  for (int r = 0; r < 3; ++r)
    weight_rows[r] = a.weight + (r < 2 ? g + 8 * r : kTileOutputs + g) * a.weight_stride;
#pragma unroll
  for (int i = 0; i < kBlockChunks; ++i) {
    const int column = span_column(block, i);
    const bool inside = block + i * kClusterBlocks < p.chunks && column < kClusterN * embd;
#pragma unroll
    for (int r = 0; r < 3; ++r) {
      l.weights[i][r] =
          inside ? __ldg(reinterpret_cast<const uint4*>(weight_rows[r] + column)) : uint4{};
    }
  }
#pragma unroll
  for (int i = 0; i < kBlockChunks; ++i) {
    const int column = span_column(block, i);
    const bool inside = block + i * kClusterBlocks < p.chunks && column < kClusterN * embd;
    // The span's stream (n = 4): comparisons instead of a division.
    const int h = (column >= embd) + (column >= 2 * embd) + (column >= 3 * embd);
    l.x[i] =
        inside && g == 0 ? load_lane_inputs(a.x.at(row, h) + (column - h * embd)) : LaneInputs{};
  }
  if constexpr (kFull) {
    const hc::SplitCollapseArgs& sc = p.split_collapse;
    const std::int64_t d = slab_element(block);
    if (block < p.slabs && d < a.embd) {
      load_stream_quads(sc.collapse, row, d, l.streams);
      l.pre_scale = __ldg(sc.split.scale);
#pragma unroll
      for (int h = 0; h < kClusterN; ++h) l.pre_base[h] = __ldg(sc.split.base + h);
    }
    if (block == 0) {
#pragma unroll
      for (int j = 0; j < kMaxSlabs; ++j) {
        const std::int64_t e = slab_element(j);
        l.norm_weight[j] =
            j < p.slabs && e < a.embd ? load_quad<true>(sc.norm.weight, e, a.embd) : Quad{};
      }
    }
  }
}

// The block's span results, then its chunk totals (a chunk: first half + second half), pushed
// into every block that needs the mix.
template <bool kFull>
__device__ void push_chunk_totals(const ClusterLaunch& p, cg::cluster_group& cluster, int block,
                                  const ThreadLoads& l, ClusterShared& s) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int half = warp / kSpansPerHalf;
  const int span = warp % kSpansPerHalf;
  const int g = lane / 4;
#pragma unroll
  for (int i = 0; i < kBlockChunks; ++i) {
    if (block + i * kClusterBlocks >= p.chunks) break;
    LaneWeights w = {};
    widen_lane_weights(l.weights[i][0], w.v[0][0]);
    widen_lane_weights(l.weights[i][1], w.v[0][1]);
    widen_lane_weights(l.weights[i][2], w.v[1][0]);
    float d[kRoundTiles][4];
    span_products(w, split_inputs(l.x[i]), true, d);
    const float squares = span_squares(l.x[i]);
    float* out = s.spans[i][half][span];
    if (lane % 4 == 0) {  // D(k, 0), row 0 of the group, for k = g, g + 8, 16 + g
      out[g] = d[0][0];
      out[g + 8] = d[0][2];
      out[kTileOutputs + g] = d[1][0];
    }
    if (lane == 0) out[kClusterM] = squares;
  }
  __syncthreads();
  // Pairs with the kernel's first arrival: no block writes into another before that one has
  // started (compute-sanitizer's racecheck flags such writes).
  cluster.barrier_wait();
  for (int e = threadIdx.x; e < kBlockChunks * kEntries; e += kRowThreads) {
    const int i = e / kEntries;
    const int k = e % kEntries;
    if (block + i * kClusterBlocks >= p.chunks) continue;
    const float total =
        half_total(&s.spans[i][0][0][k], kEntries) + half_total(&s.spans[i][1][0][k], kEntries);
    for (int b = 0; b < kClusterBlocks; ++b) {
      if (needs_mix<kFull>(p, b)) *cluster.map_shared_rank(&s.chunks[block][i][k], b) = total;
    }
  }
}

// The row's totals from every block's chunk totals: lane l adds chunks l, l + 32, … in order,
// then the butterfly adds the lanes (the grid kernel's combine); warp w takes entries w, w + 8, ….
// Then the mix. Ends synchronised.
__device__ void combine_chunks(const ClusterLaunch& p, ClusterShared& s) {
  constexpr int kWarpEntries = (kEntries + kRowWarps - 1) / kRowWarps;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  // A warp's entries side by side (unrolled), so that their butterflies may overlap. Measured,
  // this made little difference: the combine takes ≈ 0.8 µs at T = 1 either way (H200).
  float total[kWarpEntries];
#pragma unroll
  for (int q = 0; q < kWarpEntries; ++q) {
    const int k = min(warp + q * kRowWarps, kEntries - 1);
    float v[kCombineLoads];
#pragma unroll
    for (int j = 0; j < kCombineLoads; ++j) {
      const int c = lane + j * kWarpSize;
      v[j] = c < p.chunks ? s.chunks[c % kClusterBlocks][c / kClusterBlocks][k] : 0.0f;
    }
    total[q] = 0.0f;
#pragma unroll
    for (int j = 0; j < kCombineLoads; ++j) {
      if (lane + j * kWarpSize < p.chunks) total[q] += v[j];
    }
  }
#pragma unroll
  for (int q = 0; q < kWarpEntries; ++q) total[q] = warp_sum(total[q]);
  if (lane == 0) {
#pragma unroll
    for (int q = 0; q < kWarpEntries; ++q) {
      if (warp + q * kRowWarps < kEntries) s.totals[warp + q * kRowWarps] = total[q];
    }
  }
  __syncthreads();
  if (threadIdx.x < kClusterM) {
    s.mix[threadIdx.x] = mix_output(p.norm_mix, s.totals[threadIdx.x], s.totals[kClusterM]);
  }
  __syncthreads();
}

// Slab blocks: the thread's quad of the block's slab, pushed to block 0 (the caller stores it
// after arriving at the barrier, whose release then does not wait for the global stores).
__device__ Quad collapse_slab(const ClusterLaunch& p, cg::cluster_group& cluster, int block,
                              const ThreadLoads& l, ClusterShared& s) {
  const hc::SplitCollapseArgs& sc = p.split_collapse;
  const std::int64_t d = slab_element(block);
  if (d >= sc.collapse.embd) return {};
  float pre[kClusterN];
#pragma unroll
  for (int h = 0; h < kClusterN; ++h) {
    pre[h] = hc_pre_weight(fmaf(s.mix[h], l.pre_scale, l.pre_base[h]), sc.split.eps);
  }
  const Quad u = collapse_stream_quads(pre, l.streams);
  float* collapsed = cluster.map_shared_rank(s.collapsed, 0);
  *reinterpret_cast<float4*>(collapsed + d) = make_float4(u.v[0], u.v[1], u.v[2], u.v[3]);
  return u;
}

// Block 0, with the whole collapsed row in its shared memory: the RMSNorm, thread i over its
// quads in slab order (collapse_norm_cached's order).
__device__ void norm_row(const ClusterLaunch& p, std::int64_t row, const ThreadLoads& l,
                         ClusterShared& s) {
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

// Block kSplitBlock: the mix row, and for HC-pre the split row (lanes 0 .. 3 of warp 0 run the
// Sinkhorn).
template <bool kFull>
__device__ void write_mix_and_split(const ClusterLaunch& p, std::int64_t row, ClusterShared& s) {
  if (threadIdx.x < kClusterM) p.norm_mix.mix.row(row)[threadIdx.x] = s.mix[threadIdx.x];
  if constexpr (kFull) {
    if (threadIdx.x >= kWarpSize) return;
    const hc::SplitArgs& split = p.split_collapse.split;
    split_row4_lanes(s.mix, split.scale, split.base, split.iters, split.eps, s.split);
    __syncwarp();
    if (threadIdx.x < kClusterM) split.split.row(row)[threadIdx.x] = s.split[threadIdx.x];
  }
}

// kFull: HC-pre, else norm-mix only. Grid (16, T), clusters of 16 blocks along x: one per row.
template <bool kFull>
__global__ void __launch_bounds__(kRowThreads, 1) cluster_pre_kernel(const ClusterLaunch p) {
  __shared__ ClusterShared s;
  cg::cluster_group cluster = cg::this_cluster();
  const int block = static_cast<int>(cluster.block_rank());
  const std::int64_t row = blockIdx.y;
  // The launch may overlap the kernel before (nothing is read before that completes), and the
  // kernel after may start on the SMs the cluster leaves idle.
  allow_dependent_grids();
  wait_for_prior_grids();
  ThreadLoads loads;
  issue_loads<kFull>(p, block, row, loads);
  // This block has started (waited for before the first write into another block).
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  push_chunk_totals<kFull>(p, cluster, block, loads, s);
  cluster.sync();  // every block's chunk totals have arrived
  // Orders this block's own pushes (generic stores by other threads) before the reads for
  // compute-sanitizer's racecheck, which does not count the cluster barrier as ordering them.
  __syncthreads();
  if (block == kSplitBlock) {
    // Arrives first: the barrier below then waits only for the collapse, not the Sinkhorn.
    cluster.barrier_arrive();
    combine_chunks(p, s);
    write_mix_and_split<kFull>(p, row, s);
    cluster.barrier_wait();  // no block leaves while another may still write to it
    return;
  }
  if (!needs_mix<kFull>(p, block)) {
    cluster.barrier_arrive();
    cluster.barrier_wait();
    return;
  }
  // An HC-pre slab block.
  combine_chunks(p, s);
  const Quad u = collapse_slab(p, cluster, block, loads, s);
  cluster.barrier_arrive();  // releases the pushed slab
  const hc::CollapseArgs& collapse = p.split_collapse.collapse;
  const std::int64_t d = slab_element(block);
  if (d < collapse.embd) store_quad(collapse.out.row(row), d, collapse.embd, u);
  cluster.barrier_wait();  // block 0: every slab has arrived
  if (block == 0) norm_row(p, row, loads, s);
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

// Clusters of 16 blocks along x, one per row; a dependent launch (dependent_launch.cuh).
cudaLaunchConfig_t cluster_config(std::int64_t rows, Stream stream,
                                  cudaLaunchAttribute (&attributes)[2]) {
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = kClusterBlocks;
  attributes[0].val.clusterDim.y = 1;
  attributes[0].val.clusterDim.z = 1;
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kClusterBlocks, static_cast<unsigned>(rows));
  config.blockDim = dim3(kRowThreads);
  config.stream = native(stream);
  config.attrs = attributes;
  config.numAttrs = 2;
  return config;
}

// Whether clusters of 16 blocks of this kernel can run on the current device; the first call per
// device allows the non-portable size and asks the occupancy calculator.
template <bool kFull>
bool clusters_fit() {
  static std::mutex mutex;
  static std::uint64_t checked = 0;  // bit d: device d (mod 64) was asked
  static std::uint64_t fits = 0;
  int device = 0;
  TD_CUDA_CHECK(cudaGetDevice(&device));
  const std::uint64_t bit = std::uint64_t{1} << (device & 63);
  const std::lock_guard<std::mutex> lock(mutex);
  if ((checked & bit) == 0) {
    checked |= bit;
    const auto kernel = cluster_pre_kernel<kFull>;
    int clusters = 0;
    cudaLaunchAttribute attributes[2];
    const cudaLaunchConfig_t config = cluster_config(1, Stream{}, attributes);
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
            cudaSuccess &&
        cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters > 0) {
      fits |= bit;
    }
    (void)cudaGetLastError();  // a refusal above is an answer, not an error of a later launch
  }
  return (fits & bit) != 0;
}

template <bool kFull>
bool try_launch(const ClusterLaunch& p, std::int64_t rows, Stream stream) {
  const hc::NormMixArgs& a = p.norm_mix;
  const bool shape = a.n_hc == kClusterN && rows <= kClusterPreMaxRows && a.embd % 8 == 0 &&
                     a.embd <= kMaxSlabs * kSlabElements && aligned16(a.x.data) &&
                     a.x.row_stride % 4 == 0 && a.x.stream_stride % 4 == 0 && aligned16(a.weight) &&
                     a.weight_stride % 8 == 0;
  if (!shape || !clusters_fit<kFull>()) return false;
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config = cluster_config(rows, stream, attributes);
  TD_CUDA_CHECK(cudaLaunchKernelEx(&config, cluster_pre_kernel<kFull>, p));
  return true;
}

ClusterLaunch make_launch(const hc::NormMixArgs& args) {
  ClusterLaunch p;
  p.norm_mix = args;
  p.chunks = static_cast<int>(hc::pre_chunks(args.n_hc * args.embd));
  p.slabs = static_cast<int>((args.embd + kSlabElements - 1) / kSlabElements);
  return p;
}

}  // namespace

bool hc_norm_mix_on_cluster(const hc::NormMixArgs& args, Stream stream) {
  return try_launch<false>(make_launch(args), args.rows, stream);
}

bool hc_pre_on_cluster(const hc::PreArgs& args, Stream stream) {
  ClusterLaunch p = make_launch(args.norm_mix);
  p.split_collapse = args.split_collapse;
  return try_launch<true>(p, args.norm_mix.rows, stream);
}

}  // namespace turbodecode::cuda
