// norm-mix and HC-pre in one launch. Grid: (chunk of the n·E row, group of kPreGroupRows
// rows). Each block writes its chunk's partial dot products and sum of squares to the
// workspace; the last block of a group to arrive (a counter it resets to zero) combines the
// partials in chunk order and finishes the group's rows: mix, then for HC-pre split, collapse
// and RMSNorm with the same block routines as the standalone kernels.
#include <cuda_fp16.h>

#include "common/cuda_check.cuh"
#include "hc/cuda/hc_cuda.h"
#include "hc/cuda/hc_rows.cuh"
#include "hc/pre_workspace.h"

namespace turbodecode::cuda {
namespace {

using hc::kPreChunkWidth;
using hc::kPreGroupRows;
constexpr int kLaneElements = kPreChunkWidth / kWarpSize;
static_assert(kPreChunkWidth == kRowThreads, "one chunk element per thread when staging x");
constexpr int kMixRowsPerPass = 4;
constexpr int kCombinePerPass = 13;  // kRowWarps·13 ≥ kPreGroupRows·(24 + 1)

struct PreLaunch {
  hc::NormMixArgs norm_mix;
  hc::SplitCollapseArgs split_collapse;  // read only by the HC-pre variant
  float* partials = nullptr;             // [rows][chunks][M + 1]
  unsigned* counters = nullptr;          // [groups]
  int chunks = 0;
};

__device__ __forceinline__ float* partial_slot(const PreLaunch& p, std::int64_t t, int chunk) {
  return p.partials + (t * p.chunks + chunk) * (p.norm_mix.mix_width + 1);
}

using MixWeights = float[kMixRowsPerPass][kLaneElements];

// This lane's W values for mix outputs k0 + q·kRowWarps (q < kMixRowsPerPass) of the chunk
// starting at `begin`; zero past the row or past M. All loads are issued before any is used.
__device__ __forceinline__ void load_mix_weights(const hc::NormMixArgs& a, int k0,
                                                 std::int64_t begin, int lane, MixWeights& w) {
  const std::int64_t width = a.n_hc * a.embd;
#pragma unroll
  for (int q = 0; q < kMixRowsPerPass; ++q) {
    const int k = k0 + q * kRowWarps;
    const std::uint16_t* w_row = a.weight + k * a.weight_stride + begin;
#pragma unroll
    for (int j = 0; j < kLaneElements; ++j) {
      const int e = lane + kWarpSize * j;
      w[q][j] = k < a.mix_width && begin + e < width
                    ? __half2float(__ushort_as_half(__ldg(w_row + e)))
                    : 0.0f;
    }
  }
}

// Stages the chunk of rows t0 .. t0 + rows_here of x in shared memory (zero past the row).
__device__ __forceinline__ void stage_chunk(const hc::NormMixArgs& a, std::int64_t begin,
                                            std::int64_t t0, int rows_here,
                                            float (*xs)[kPreChunkWidth]) {
  const std::int64_t width = a.n_hc * a.embd;
  const std::int64_t i = begin + threadIdx.x;
  const int h = static_cast<int>(i / a.embd);
  // One value per row and thread, all loads in flight together.
#pragma unroll
  for (int r = 0; r < kPreGroupRows; ++r) {
    if (r < rows_here) {
      xs[r][threadIdx.x] = i < width ? __ldg(a.x.at(t0 + r, h) + (i - h * a.embd)) : 0.0f;
    }
  }
  __syncthreads();
}

// Chunk `chunk` of rows t0 .. t0 + rows_here: partial Σ W·x per mix output and Σ x² per row.
// Lane l of every warp owns chunk elements l + 32·j, so a row's partials never depend on the
// other rows of its group. The first W loads are in flight while x is staged (M = 24 takes a
// single pass).
__device__ void write_partials(const PreLaunch& p, int chunk, std::int64_t t0, int rows_here,
                               float (*xs)[kPreChunkWidth]) {
  const hc::NormMixArgs& a = p.norm_mix;
  const std::int64_t begin = static_cast<std::int64_t>(chunk) * kPreChunkWidth;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  MixWeights w;
  load_mix_weights(a, warp, begin, lane, w);
  stage_chunk(a, begin, t0, rows_here, xs);
  if (warp < rows_here) {
    float squares = 0.0f;
#pragma unroll
    for (int j = 0; j < kLaneElements; ++j) {
      const float v = xs[warp][lane + kWarpSize * j];
      squares = fmaf(v, v, squares);
    }
    squares = warp_sum(squares);
    if (lane == 0) partial_slot(p, t0 + warp, chunk)[a.mix_width] = squares;
  }
  for (int k0 = warp; k0 < a.mix_width; k0 += kRowWarps * kMixRowsPerPass) {
    if (k0 != warp) load_mix_weights(a, k0, begin, lane, w);
    for (int r = 0; r < rows_here; ++r) {
#pragma unroll
      for (int q = 0; q < kMixRowsPerPass; ++q) {
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < kLaneElements; ++j) {
          acc = fmaf(w[q][j], xs[r][lane + kWarpSize * j], acc);
        }
        acc = warp_sum(acc);
        const int k = k0 + q * kRowWarps;
        if (lane == 0 && k < a.mix_width) partial_slot(p, t0 + r, chunk)[k] = acc;
      }
    }
  }
}

// Counts this block in; true for the last block of the group, whose increment also resets
// the counter for the next launch. The fences order the partials before the count (writers) and
// after it (the last block).
__device__ bool arrive_last(unsigned* counter, int chunks) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    // atomicInc wraps to 0 after chunks − 1: the last arrival resets the counter itself.
    const unsigned last_count = static_cast<unsigned>(chunks) - 1u;
    last = atomicInc(counter, last_count) == last_count;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// Combines the partials of rows t0 .. t0 + rows_here into totals[r][k] (k ≤ M, the last the sum
// of squares). Each entry is summed by one warp, chunks in a fixed lane/butterfly order; a warp
// takes kCombinePerPass entries at once, so one pass holds a whole group at M = 24 with all its
// loads in flight. Ends synchronised.
__device__ void combine_partials(const PreLaunch& p, std::int64_t t0, int rows_here,
                                 float (*totals)[kSplitStride + 1]) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int entries = p.norm_mix.mix_width + 1;
  const int count = rows_here * entries;
  for (int e0 = warp; e0 < count; e0 += kRowWarps * kCombinePerPass) {
    float total[kCombinePerPass] = {};
#pragma unroll 2
    for (int g = lane; g < p.chunks; g += kWarpSize) {
#pragma unroll
      for (int q = 0; q < kCombinePerPass; ++q) {
        const int e = e0 + q * kRowWarps;
        if (e < count) total[q] += __ldcg(partial_slot(p, t0 + e / entries, g) + e % entries);
      }
    }
#pragma unroll
    for (int q = 0; q < kCombinePerPass; ++q) {
      const int e = e0 + q * kRowWarps;
      const float sum = warp_sum(total[q]);
      if (lane == 0 && e < count) totals[e / entries][e % entries] = sum;
    }
  }
  __syncthreads();
}

// mix = ρ·totals for rows t0 .. t0 + rows_here, into shared mix_rows and the mix output. Ends
// synchronised.
__device__ void write_mix_rows(const hc::NormMixArgs& a, std::int64_t t0, int rows_here,
                               const float (*totals)[kSplitStride + 1],
                               float (*mix_rows)[kSplitStride]) {
  const int m = a.mix_width;
  for (int e = threadIdx.x; e < rows_here * m; e += kRowThreads) {
    const int r = e / m;
    const int k = e % m;
    const float rho = hc_rms_scale(totals[r][m], a.n_hc * a.embd, a.eps);
    const float v = rho * totals[r][k];
    mix_rows[r][k] = v;
    a.mix.row(t0 + r)[k] = v;
  }
  __syncthreads();
}

// kFull: HC-pre (else norm-mix only); kFixedN as for split_rows_block (unused by norm-mix).
template <bool kFull, int kFixedN>
__global__ void __launch_bounds__(kRowThreads) pre_kernel(const PreLaunch p) {
  __shared__ float xs[kPreGroupRows][kPreChunkWidth];
  __shared__ float totals[kPreGroupRows][kSplitStride + 1];
  __shared__ float mix_rows[kPreGroupRows][kSplitStride];
  __shared__ float split_rows[kPreGroupRows][kSplitStride];
  __shared__ float scratch[kRowWarps];
  const int chunk = static_cast<int>(blockIdx.x);
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.y) * kPreGroupRows;
  const std::int64_t left = p.norm_mix.rows - t0;
  const int rows_here = static_cast<int>(left < kPreGroupRows ? left : kPreGroupRows);
  write_partials(p, chunk, t0, rows_here, xs);
  if (!arrive_last(p.counters + blockIdx.y, p.chunks)) return;
  combine_partials(p, t0, rows_here, totals);
  write_mix_rows(p.norm_mix, t0, rows_here, totals, mix_rows);
  if constexpr (kFull) {
    const hc::SplitCollapseArgs& sc = p.split_collapse;
    split_rows_block<kFixedN>(sc.split, &mix_rows[0][0], kSplitStride, t0, rows_here,
                              &split_rows[0][0]);
    for (int r = 0; r < rows_here; ++r) {
      collapse_norm_row_block<kFixedN>(sc.collapse, sc.norm, split_rows[r], t0 + r, scratch);
    }
  }
}

PreLaunch make_launch(const HcPrePlan& plan, const hc::NormMixArgs& args, void* workspace) {
  PreLaunch p;
  p.norm_mix = args;
  p.chunks = plan.chunks;
  p.partials = static_cast<float*>(workspace);
  p.counters = reinterpret_cast<unsigned*>(
      static_cast<char*>(workspace) +
      hc::pre_partials_bytes(plan.max_rows, plan.chunks, args.mix_width));
  return p;
}

dim3 pre_grid(const HcPrePlan& plan, std::int64_t rows) {
  return dim3(static_cast<unsigned>(plan.chunks), static_cast<unsigned>(hc::pre_groups(rows)));
}

}  // namespace

void hc_norm_mix(const HcPrePlan& plan, const hc::NormMixArgs& args, void* workspace,
                 Stream stream) {
  const PreLaunch p = make_launch(plan, args, workspace);
  pre_kernel<false, 0><<<pre_grid(plan, args.rows), kRowThreads, 0, native(stream)>>>(p);
  TD_CUDA_CHECK_LAUNCH("pre_kernel<norm-mix>");
}

void hc_pre(const HcPrePlan& plan, const hc::PreArgs& args, void* workspace, Stream stream) {
  PreLaunch p = make_launch(plan, args.norm_mix, workspace);
  p.split_collapse = args.split_collapse;
  const dim3 grid = pre_grid(plan, args.norm_mix.rows);
  if (args.norm_mix.n_hc == 4) {
    pre_kernel<true, 4><<<grid, kRowThreads, 0, native(stream)>>>(p);
  } else {
    pre_kernel<true, 0><<<grid, kRowThreads, 0, native(stream)>>>(p);
  }
  TD_CUDA_CHECK_LAUNCH("pre_kernel<hc-pre>");
}

}  // namespace turbodecode::cuda
