// norm-mix and HC-pre on CUDA: the residency plan_hc_pre records, and one switch over the kernel
// hc::choose_pre_kernel picks from it (docs/hc.md, "Which kernel runs").
#include "hc/cuda/hc_cuda.h"
#include "hc/cuda/pre/launch.h"
#include "hc/pre_kernel.h"
#include "hc/pre_workspace.h"

namespace turbodecode::cuda {
namespace {

HcPreResidency residency(const HcParams& params, bool full) {
  if (!hc::fits_cluster_kernels(params)) return {};
  HcPreResidency r;
  r.single_row_clusters = cluster_small_t_residency(full, 1);
  r.row_group_clusters = cluster_small_t_residency(full, hc::kPreMaxGroupRows);
  r.tile_clusters_8 = row_clusters_residency(full, 8);
  r.tile_clusters_2 = row_clusters_residency(full, 2);
  return r;
}

HcPreKernel kernel_for(const HcPreResidency& residency, const HcPrePlan& plan,
                       const hc::NormMixArgs& args) {
  return hc::choose_pre_kernel(residency, plan.params, args.rows, hc::allows_vector_loads(args));
}

}  // namespace

HcPreResidency hc_norm_mix_residency(const HcParams& params) {
  return residency(params, false);
}

HcPreResidency hc_pre_residency(const HcParams& params) {
  return residency(params, true);
}

void hc_norm_mix(const HcPrePlan& plan, const hc::NormMixArgs& args, void* workspace,
                 Stream stream) {
  const HcPreResidency& r = plan.norm_mix_residency;
  switch (kernel_for(r, plan, args)) {
    case HcPreKernel::cluster_small_t:
      norm_mix_on_cluster_small_t(args, hc::small_t_cluster_rows(r, args.rows), stream);
      return;
    case HcPreKernel::row_clusters:
      norm_mix_on_row_clusters(args, stream);
      return;
    case HcPreKernel::grid:
    case HcPreKernel::cpu:  // not chosen for a CUDA plan
      norm_mix_on_grid(plan, args, workspace, stream);
      return;
  }
}

void hc_pre(const HcPrePlan& plan, const hc::PreArgs& args, void* workspace, Stream stream) {
  const HcPreResidency& r = plan.pre_residency;
  switch (kernel_for(r, plan, args.norm_mix)) {
    case HcPreKernel::cluster_small_t:
      pre_on_cluster_small_t(args, hc::small_t_cluster_rows(r, args.norm_mix.rows), stream);
      return;
    case HcPreKernel::row_clusters:
      pre_on_row_clusters(args, stream);
      return;
    case HcPreKernel::grid:
    case HcPreKernel::cpu:
      pre_on_grid(plan, args, workspace, stream);
      return;
  }
}

}  // namespace turbodecode::cuda
