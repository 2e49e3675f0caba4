// The launchers of the three norm-mix / HC-pre kernels (HcPreKernel) and what the device runs
// at once of the cluster kernels. dispatch.cu launches the one hc::choose_pre_kernel picks;
// each launcher assumes the problem is one its kernel takes.
#pragma once

#include "hc/hc_args.h"
#include "hc/validate_hc.h"
#include "turbodecode/hc.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

// HcPreKernel::grid (grid.cu). workspace: the plan's zeroed workspace.
void norm_mix_on_grid(const HcPrePlan& plan, const hc::NormMixArgs& args, void* workspace,
                      Stream stream);
void pre_on_grid(const HcPrePlan& plan, const hc::PreArgs& args, void* workspace, Stream stream);

// HcPreKernel::cluster_small_t (cluster_small_t.cu): 16-block clusters of rows_per_cluster rows
// (1 or hc::kPreMaxGroupRows).
void norm_mix_on_cluster_small_t(const hc::NormMixArgs& args, int rows_per_cluster, Stream stream);
void pre_on_cluster_small_t(const hc::PreArgs& args, int rows_per_cluster, Stream stream);

// HcPreKernel::row_clusters (row_clusters.cu).
void norm_mix_on_row_clusters(const hc::NormMixArgs& args, Stream stream);
void pre_on_row_clusters(const hc::PreArgs& args, Stream stream);

// How many clusters the current device runs at once (0: none) of the HC-pre (full) or
// norm-mix kernel: cluster_small_t with rows_per_cluster rows, row_clusters with
// blocks_per_tile (8 or 2) blocks.
int cluster_small_t_residency(bool full, int rows_per_cluster);
int row_clusters_residency(bool full, int blocks_per_tile);

}  // namespace turbodecode::cuda
