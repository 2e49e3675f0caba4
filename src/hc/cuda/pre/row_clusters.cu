// norm-mix and HC-pre for many rows (docs/hc.md, "HC-pre for many rows"): one cluster per tile of
// 8 rows (one MMA column tile), of 8 blocks (a row each) up to T = 512 and of 2 blocks (four
// rows each) beyond. The small-T cluster kernel (cluster_small_t.cu) puts 16 blocks on a group
// and keeps every load of the launch in registers, one block per SM: beyond the groups that run
// at once they would run in waves of one latency chain each. Here a block streams its chunks,
// each chunk's loads issued two chunks ahead, in at most 128 registers per thread and 21 KiB
// (8 blocks) or 45 KiB (2 blocks) of shared memory, so two blocks share an SM and a tile's tail
// overlaps other tiles' loads.
//
// Block b computes chunks b, b + kBlocks, … of the tile's rows, the two halves of a chunk by its
// 8 warps, one span each (spans.cuh); as each chunk is done, its totals go into the shared
// memory of the blocks that finish the rows. After a cluster barrier those add them up in the
// grid kernel's order (combine_in_lane_order) and write the mix rows; for HC-pre warp 0 runs the
// splits, four lanes per row, and then the block collapses and normalises its rows one by one
// with the standalone collapse + RMSNorm routine (x again, mostly from L2). A row's results are
// bitwise those of the other HC-pre kernels and of the unfused operators.
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

constexpr int kTileRows = hc::kPreMaxGroupRows;
constexpr int kN = hc::kClusterN;
constexpr int kM = hc_mix_width(kN);
constexpr int kEntries = kM + 1;  // the M outputs and the sum of squares
constexpr int kMaxChunks = kN * kClusterMaxEmbd / hc::kPreChunkWidth;
constexpr int kRowQuads = kClusterMaxEmbd / kQuadStride;  // a thread's quads of a row
constexpr int kSpanStride = kTileRows * kEntries;         // between a half's spans
static_assert(kRowQuads * kQuadStride == kClusterMaxEmbd, "a thread's quads cover the widest row");
static_assert(kRowWarps == 2 * kSpansPerHalf, "a block's warps: two halves of four spans");
static_assert(kM == kTileOutputs + 8, "W rows g, g + 8 and 16 + g are the outputs");

struct TileLaunch {
  hc::NormMixArgs norm_mix;
  hc::SplitCollapseArgs split_collapse;  // read only by HC-pre
  int chunks = 0;
};

// A tile's cluster has kBlocks blocks (8 or 2): block b computes chunks b, b + kBlocks, … of
// the tile's rows and finishes rows kRows · b … kRows · b + kRows − 1.
template <int kBlocks>
struct TileBlocks {
  static constexpr int kRows = kTileRows / kBlocks;
  static constexpr int kChunks = kMaxChunks / kBlocks;  // a block's chunks, at most
  static_assert(kTileRows % kBlocks == 0 && kMaxChunks % kBlocks == 0, "blocks share a tile");
};

template <int kBlocks>
struct TileShared {
  using Shape = TileBlocks<kBlocks>;
  float spans[2][2][kSpansPerHalf][kTileRows][kEntries];  // the last two chunks' spans
  // This block's rows' chunk totals: chunk b + kBlocks · i pushed by block b.
  float chunks[kBlocks][Shape::kChunks][Shape::kRows][kEntries];
  float totals[Shape::kRows][kEntries];
  float mix[Shape::kRows][kM];
  float split[Shape::kRows][kM];
  float scratch[kRowWarps];
};

// What a lane loads for one chunk: W rows g, g + 8 and 16 + g and x of tile row g at its span
// columns (zero past the row or the tile).
struct ChunkLoads {
  uint4 weights[3];
  LaneInputs x;
};

// The lane's sources: its three W rows and its tile row's streams (each offset by the stream's
// first column, so that a column of the n·E row indexes it directly), and its span column in
// the block's first chunk. Worked out once; a chunk's loads then only add the chunk's offset.
struct LaneSources {
  const std::uint16_t* weight[3];  // W rows g, g + 8 and 16 + g
  const float* x[kN];              // nullptr past the tile
  int column;
  int row_width;  // n·E
  int embd;
};

__device__ __forceinline__ LaneSources lane_sources(const hc::NormMixArgs& a, RowGroup tile,
                                                    int block) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int g = lane / 4;
  LaneSources l;
#pragma unroll
  for (int r = 0; r < 3; ++r)
    l.weight[r] = a.weight + (r < 2 ? g + 8 * r : kTileOutputs + g) * a.weight_stride;
#pragma unroll
  for (int h = 0; h < kN; ++h)
    l.x[h] = g < tile.count ? a.x.at(tile.first + g, h) - h * a.embd : nullptr;
  // Rows are at most 20480 values wide: columns fit in 32 bits.
  l.column = block * hc::kPreChunkWidth + warp / kSpansPerHalf * kHalfWidth +
             warp % kSpansPerHalf * kSpanWidth + lane % 4 * kLaneColumns;
  l.row_width = kN * static_cast<int>(a.embd);
  l.embd = static_cast<int>(a.embd);
  return l;
}

// The lane's loads for the block's chunk i (zero past the row or the tile).
template <int kBlocks>
__device__ __forceinline__ ChunkLoads load_chunk(const LaneSources& l, int i) {
  const int column = l.column + i * kBlocks * hc::kPreChunkWidth;
  ChunkLoads c = {};
  if (column >= l.row_width) return c;
#pragma unroll
  for (int r = 0; r < 3; ++r)
    c.weights[r] = __ldg(reinterpret_cast<const uint4*>(l.weight[r] + column));
  const float* x = column >= 3 * l.embd   ? l.x[3]
                   : column >= 2 * l.embd ? l.x[2]
                   : column >= l.embd     ? l.x[1]
                                          : l.x[0];
  if (x != nullptr) c.x = load_lane_inputs(x + column);
  return c;
}

// Chunk i's totals (first half + second half) of each tile row, pushed into the row's block.
template <int kBlocks>
__device__ void push_chunk_totals(cg::cluster_group& cluster, int block, RowGroup tile, int i,
                                  const float (&spans)[2][kSpansPerHalf][kTileRows][kEntries],
                                  TileShared<kBlocks>& s) {
  constexpr int kRows = TileBlocks<kBlocks>::kRows;
  const int e = static_cast<int>(threadIdx.x);
  const int row = e / kEntries;
  const int k = e % kEntries;
  if (row >= tile.count) return;
  const float total =
      half_total(&spans[0][0][row][k], kSpanStride) + half_total(&spans[1][0][row][k], kSpanStride);
  *cluster.map_shared_rank(&s.chunks[block][i][row % kRows][k], row / kRows) = total;
}

// Chunk i of the block (chunk block + kBlocks · i): this warp's span, then, once every warp has
// stored its span, the chunk's totals pushed (the spans rotate through two slots: a slot is
// written again only after the barrier of the next chunk, when its pushes are done).
template <int kBlocks>
__device__ __forceinline__ void span_and_push(cg::cluster_group& cluster, int block, RowGroup tile,
                                              int i, const ChunkLoads& loads,
                                              TileShared<kBlocks>& s) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  store_span_entries<kTileRows>(loads.weights, loads.x,
                                s.spans[i % 2][warp / kSpansPerHalf][warp % kSpansPerHalf]);
  __syncthreads();
  if (i == 0) cluster.barrier_wait();  // every block has started: pushes may go out
  push_chunk_totals(cluster, block, tile, i, s.spans[i % 2], s);
}

// The block's chunks block, block + kBlocks, …, each chunk's loads issued two chunks ahead
// (three sets of loads in turn, so that none is copied).
template <int kBlocks>
__device__ void compute_chunks(const TileLaunch& p, cg::cluster_group& cluster, int block,
                               RowGroup tile, TileShared<kBlocks>& s) {
  static_assert(kTileRows * kEntries <= kRowThreads, "one pushed total per thread and chunk");
  const LaneSources sources = lane_sources(p.norm_mix, tile, block);
  const int count = (p.chunks - block + kBlocks - 1) / kBlocks;  // the block's chunks
  if (count == 0) cluster.barrier_wait();
  ChunkLoads a = load_chunk<kBlocks>(sources, 0);
  ChunkLoads b = load_chunk<kBlocks>(sources, 1);
  ChunkLoads c;
#pragma unroll 1
  for (int i = 0; i < count; i += 3) {
    c = load_chunk<kBlocks>(sources, i + 2);
    span_and_push(cluster, block, tile, i, a, s);
    if (i + 1 >= count) break;
    a = load_chunk<kBlocks>(sources, i + 3);
    span_and_push(cluster, block, tile, i + 1, b, s);
    if (i + 2 >= count) break;
    b = load_chunk<kBlocks>(sources, i + 4);
    span_and_push(cluster, block, tile, i + 2, c, s);
  }
}

// The mix of the block's rows t0 .. t0 + rows − 1 (into shared memory and the output), from the
// chunk totals pushed into this block.
template <int kBlocks>
__device__ void write_mixes(const TileLaunch& p, std::int64_t t0, int rows,
                            TileShared<kBlocks>& s) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < rows * kEntries) {
    const int j = tid / kEntries;
    const int k = tid % kEntries;
    s.totals[j][k] = combine_in_lane_order(
        p.chunks, [&](int c) { return s.chunks[c % kBlocks][c / kBlocks][j][k]; });
  }
  __syncthreads();
  if (tid < rows * kM) {
    const int j = tid / kM;
    const int k = tid % kM;
    const float mix = mix_output(p.norm_mix, s.totals[j][k], s.totals[j][kM]);
    s.mix[j][k] = mix;
    p.norm_mix.mix.row(t0 + j)[k] = mix;
  }
}

// HC-pre's tail of the block's rows: the splits (warp 0, four lanes per row), then collapse +
// RMSNorm of one row after the other (every thread). The other warps' collapse loads are in
// flight during the Sinkhorn; they wait for warp 0 only at the first RMSNorm's block sum.
template <int kBlocks>
__device__ void finish_rows(const TileLaunch& p, std::int64_t t0, int rows,
                            TileShared<kBlocks>& s) {
  const hc::SplitCollapseArgs& sc = p.split_collapse;
  const hc::SplitArgs& split = sc.split;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kWarpSize) {
    const int j = tid / kN;
    const int source = min(j, rows - 1);  // quads past the rows repeat the last one
    split_row4_lanes(s.mix[source], split.scale, split.base, split.iters, split.eps,
                     s.split[source], j < rows);
    __syncwarp();
    for (int e = tid; e < rows * kM; e += kWarpSize)
      split.split.row(t0 + e / kM)[e % kM] = s.split[e / kM][e % kM];
  }
  for (int j = 0; j < rows; ++j) {
    float pre[kN];
#pragma unroll
    for (int h = 0; h < kN; ++h) {
      pre[h] =
          hc_pre_weight(fmaf(s.mix[j][h], __ldg(split.scale), __ldg(split.base + h)), split.eps);
    }
    collapse_norm_cached<kN, kRowQuads>(sc.collapse, sc.norm, pre, t0 + j, s.scratch);
  }
}

// kFull: HC-pre, else norm-mix only. Grid (kBlocks, ⌈T / 8⌉), clusters of kBlocks blocks along x.
template <bool kFull, int kBlocks>
__global__ void __launch_bounds__(kRowThreads, 2) tile_pre_kernel(const TileLaunch p) {
  constexpr int kRows = TileBlocks<kBlocks>::kRows;
  extern __shared__ __align__(16) unsigned char shared[];
  auto& s = *reinterpret_cast<TileShared<kBlocks>*>(shared);
  cg::cluster_group cluster = cg::this_cluster();
  const int block = static_cast<int>(cluster.block_rank());
  const RowGroup tile = cluster_row_group(p.norm_mix.rows, kTileRows);
  allow_dependent_grids();
  wait_for_prior_grids();
  arrive_started();
  compute_chunks(p, cluster, block, tile, s);
  cluster.sync();  // every chunk total has arrived; no block writes into another after this
  // Orders the pushes (generic stores by other threads) before the reads for compute-sanitizer's
  // racecheck, which does not count the cluster barrier as ordering them.
  __syncthreads();
  const int first_row = kRows * block;
  if (first_row >= tile.count) return;
  const int rows = min(kRows, tile.count - first_row);
  write_mixes(p, tile.first + first_row, rows, s);
  if constexpr (kFull) {
    __syncthreads();
    finish_rows(p, tile.first + first_row, rows, s);
  }
}

template <int kBlocks>
cudaLaunchConfig_t tile_config(std::int64_t rows, Stream stream,
                               cudaLaunchAttribute (&attributes)[2]) {
  return cluster_launch_config(rows, kTileRows, kBlocks, kRowThreads, sizeof(TileShared<kBlocks>),
                               native(stream), attributes);
}

template <bool kFull, int kBlocks>
int resident_tiles() {
  cudaLaunchAttribute attributes[2];
  return resident_clusters<tile_pre_kernel<kFull, kBlocks>>(
      tile_config<kBlocks>(1, Stream{}, attributes));
}

template <bool kFull, int kBlocks>
void launch_tiles(const TileLaunch& p, Stream stream) {
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config = tile_config<kBlocks>(p.norm_mix.rows, stream, attributes);
  TD_CUDA_CHECK((allow_cluster_kernel<tile_pre_kernel<kFull, kBlocks>>(config.dynamicSmemBytes)));
  TD_CUDA_CHECK(cudaLaunchKernelEx(&config, tile_pre_kernel<kFull, kBlocks>, p));
}

// Clusters of 8 blocks up to hc::kWideRows rows, of 2 beyond, where their blocks' longer runs
// of chunks pay (docs/hc.md, "HC-pre for many rows").
template <bool kFull>
void launch(const TileLaunch& p, Stream stream) {
  if (p.norm_mix.rows <= hc::kWideRows) {
    launch_tiles<kFull, 8>(p, stream);
  } else {
    launch_tiles<kFull, 2>(p, stream);
  }
}

TileLaunch make_launch(const hc::NormMixArgs& args) {
  TileLaunch p;
  p.norm_mix = args;
  p.chunks = static_cast<int>(hc::pre_chunks(args.n_hc * args.embd));
  return p;
}

}  // namespace

int row_clusters_residency(bool full, int blocks_per_tile) {
  if (blocks_per_tile == 8) return full ? resident_tiles<true, 8>() : resident_tiles<false, 8>();
  return full ? resident_tiles<true, 2>() : resident_tiles<false, 2>();
}

void norm_mix_on_row_clusters(const hc::NormMixArgs& args, Stream stream) {
  launch<false>(make_launch(args), stream);
}

void pre_on_row_clusters(const hc::PreArgs& args, Stream stream) {
  TileLaunch p = make_launch(args.norm_mix);
  p.split_collapse = args.split_collapse;
  launch<true>(p, stream);
}

}  // namespace turbodecode::cuda
