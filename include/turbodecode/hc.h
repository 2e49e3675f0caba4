// DeepSeek-V4 manifold-constrained hyper-connection (mHC) operators (SPEC §3).
//
// Shapes, for T token rows, n = n_hc streams, E = embd and M = hc_mix_width(n):
//   x        HC state        [T, n, E] f32 (stream h of row t at x[t][h][:])
//   mix      mix logits      [T, M] f32
//   split    split rows      [T, M] f32: pre [0, n), post [n, 2n), comb (r, c) at 2n + r·n + c
//   pre/post per-row weights [T, n] f32 (any strides: point them into `split`)
//   comb     comb matrices   [T, n, n] f32 (any strides; [t][r][c], r source, c destination)
//   rows     block outputs   [T, E] f32
// Every view may be strided; the innermost dimension of x, rows, mix and split is contiguous.
// Outputs must not overlap inputs. Every call works on the CPU and the CUDA backend (chosen
// from the tensors' device) and validates everything before writing anything.
#pragma once

#include <cstdint>

#include "turbodecode/tensor.h"

namespace turbodecode {

// M = 2·n + n²: pre, post and the comb matrix.
constexpr int hc_mix_width(int n_hc) {
  return 2 * n_hc + n_hc * n_hc;
}

inline constexpr int kMaxHcStreams = 16;

struct HcParams {
  int n_hc = 4;              // streams, 1..16 (4 is the fast path)
  std::int64_t embd = 4096;  // E, width of one stream
  int sinkhorn_iters = 20;   // 1..1000; the last step is always a column normalisation
  float eps = 1e-6f;         // split ε (pre offset and Sinkhorn denominators)
  float norm_eps = 1e-6f;    // ε_rms of the RMSNorms (norm-mix and the collapsed row)
};

// split: mix [T, M], scale [3] (s0 pre, s1 post, s2 comb), base [M] -> split [T, M].
void hc_split(const HcParams& params, const TensorView& mix, const TensorView& scale,
              const TensorView& base, const TensorView& split, Stream stream = {});

// collapse: out[t][d] = Σ_h pre[t][h]·x[t][h][d] (h ascending).
void hc_collapse(const HcParams& params, const TensorView& x, const TensorView& pre,
                 const TensorView& out, Stream stream = {});

// Weighted RMSNorm of rows: out = u · (1/sqrt(mean(u²) + norm_eps)) · weight; weight [E].
void hc_rms_norm(const HcParams& params, const TensorView& u, const TensorView& weight,
                 const TensorView& out, Stream stream = {});

// split, then collapse with the split's pre weights; writes split and collapsed. Bitwise equal
// to hc_split followed by hc_collapse on the same backend.
void hc_split_collapse(const HcParams& params, const TensorView& mix, const TensorView& scale,
                       const TensorView& base, const TensorView& x, const TensorView& split,
                       const TensorView& collapsed, Stream stream = {});

// split + collapse + weighted RMSNorm (norm_weight [E]); writes split, collapsed and normed.
// Bitwise equal to hc_split, hc_collapse, hc_rms_norm on the same backend.
void hc_split_collapse_norm(const HcParams& params, const TensorView& mix, const TensorView& scale,
                            const TensorView& base, const TensorView& x,
                            const TensorView& norm_weight, const TensorView& split,
                            const TensorView& collapsed, const TensorView& normed,
                            Stream stream = {});

// HC-post: out[t][c][d] = (block[t][d] [+ add[t][d]])·post[t][c] + Σ_r comb[t][r][c]·x[t][r][d],
// summed in r order. `add` is optional (a default TensorView): the second block input.
void hc_expand(const HcParams& params, const TensorView& block, const TensorView& add,
               const TensorView& x, const TensorView& post, const TensorView& comb,
               const TensorView& out, Stream stream = {});

// Output-head weights: w[t][h] = post_scale·σ(logits[t][h]·scale[0] + base[h]) + eps;
// logits [T, n], scale [1], base [n] -> weights [T, n]. Collapse with them and normalise with
// hc_rms_norm to finish the head (SPEC §3.5).
void hc_head_weights(const HcParams& params, float post_scale, const TensorView& logits,
                     const TensorView& scale, const TensorView& base, const TensorView& weights,
                     Stream stream = {});

// ---- norm-mix and HC-pre (one launch) -------------------------------------------------------
//
// norm-mix: ρ = 1/sqrt(mean(x²) + norm_eps) over the whole n·E row, mix[k] = ρ·Σ_i W[k][i]·x_i
// with the mix matrix W [M, n·E] F16 (i = h·E + d), accurate to f32 on both backends.
//
// Determinism and batch invariance: every sum runs in a fixed order, so on one backend a row's
// results are bitwise the same on every run, whatever T, the row's place in the batch or the
// kernel that runs it (HcPreKernel below).
//
// Parameters read early: on CUDA a launch may start while the kernel launched just before it
// on the stream is still running, and may read mix_weight (and for HC-pre scale, base and
// norm_weight) before that kernel ends. So that kernel must not write them; x, and the outputs,
// keep ordinary stream order.
//
// Workspace: u8 [plan.workspace_bytes] on the plan's device (none on the CPU). Zero-fill it once
// after allocating; every run leaves its counters zeroed again, so runs of any T ≤ max_rows may
// follow each other on a stream and be captured into CUDA graphs. Runs that share one workspace
// must not overlap in time (use one workspace per concurrently running stream).
//
// Which kernel runs a norm-mix or HC-pre is decided from the plan (hc_pre_kernel below); a
// row's results are bitwise the same on each, only the time differs.
enum class HcPreKernel {
  cpu,              // the plan is for the CPU backend
  grid,             // any problem: the rows' chunks spread over a grid of blocks
  cluster_small_t,  // n_hc = 4, E ≤ 5120, E % 8 = 0: a 16-block cluster per row or per 8 rows,
                    // while all of them fit on the device at once
  row_clusters,     // the same problems at larger T: a cluster per tile of 8 rows
};

// How many clusters of each cluster-kernel shape the plan's device runs at once (0: none),
// found once by plan_hc_pre from the device's occupancy. Zero on the CPU and for problems the
// cluster kernels do not take.
struct HcPreResidency {
  int single_row_clusters = 0;  // cluster_small_t, one row per cluster
  int row_group_clusters = 0;   // cluster_small_t, 8 rows per cluster
  int tile_clusters_8 = 0;      // row_clusters, 8 blocks per tile (T ≤ 512)
  int tile_clusters_2 = 0;      // row_clusters, 2 blocks per tile (T > 512)
};

struct HcPrePlan {
  HcParams params;
  Device device = Device::cpu;
  std::int64_t max_rows = 0;
  int chunks = 1;                     // 256-column chunks per row (CUDA)
  std::int64_t workspace_bytes = 0;   // size of the `workspace` argument (0 on the CPU)
  HcPreResidency norm_mix_residency;  // the norm-mix kernels'
  HcPreResidency pre_residency;       // the HC-pre kernels'
};

HcPrePlan plan_hc_pre(const HcParams& params, std::int64_t max_rows, Device device);

// The kernel hc_pre (hc_norm_mix) runs for T = rows (1 ≤ rows ≤ plan.max_rows) when x and
// mix_weight allow 16-byte loads: both start 16-byte aligned, x's row and stream strides are
// multiples of 4 and mix_weight's row stride a multiple of 8 (true of contiguous tensors from
// cudaMalloc). Other views run HcPreKernel::grid.
HcPreKernel hc_pre_kernel(const HcPrePlan& plan, std::int64_t rows);
HcPreKernel hc_norm_mix_kernel(const HcPrePlan& plan, std::int64_t rows);

// x [T, n, E], mix_weight [M, n·E] f16 -> mix [T, M]. T <= plan.max_rows.
void hc_norm_mix(const HcPrePlan& plan, const TensorView& x, const TensorView& mix_weight,
                 const TensorView& mix, const TensorView& workspace, Stream stream = {});

// HC-pre in one launch: norm-mix -> split -> collapse -> weighted RMSNorm, writing mix, split,
// collapsed and normed. Bitwise equal to hc_norm_mix followed by hc_split_collapse_norm.
void hc_pre(const HcPrePlan& plan, const TensorView& x, const TensorView& mix_weight,
            const TensorView& scale, const TensorView& base, const TensorView& norm_weight,
            const TensorView& mix, const TensorView& split, const TensorView& collapsed,
            const TensorView& normed, const TensorView& workspace, Stream stream = {});

// ---- Q8_0 matvec fused with expand (SPEC §3.4) ----------------------------------------------
// weight: Q8_0 u8 [E, cols/32·34] (see q8.h). Results equal q8_matvec followed by hc_expand.

// Attention output: block = weight·input (input [T, cols]); writes block [T, E] and out.
void hc_expand_q8(const HcParams& params, const TensorView& weight, const TensorView& input,
                  const TensorView& block, const TensorView& x, const TensorView& post,
                  const TensorView& comb, const TensorView& out, Stream stream = {});

// Shared-expert down: shared = weight·input, stored; then expand with routed + shared.
void hc_expand_shared_q8(const HcParams& params, const TensorView& weight, const TensorView& input,
                         const TensorView& routed, const TensorView& shared, const TensorView& x,
                         const TensorView& post, const TensorView& comb, const TensorView& out,
                         Stream stream = {});

}  // namespace turbodecode
