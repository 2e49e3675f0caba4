#include "hc/pre_kernel.h"

#include <cstdint>

#include "hc/pre_workspace.h"

namespace turbodecode::hc {
namespace {

bool aligned16(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

}  // namespace

bool fits_cluster_kernels(const HcParams& params) {
  return params.n_hc == kClusterN && params.embd % 8 == 0 && params.embd <= kClusterMaxEmbd;
}

bool allows_vector_loads(const NormMixArgs& args) {
  return aligned16(args.x.data) && args.x.row_stride % 4 == 0 && args.x.stream_stride % 4 == 0 &&
         aligned16(args.weight) && args.weight_stride % 8 == 0;
}

// The small-T clusters while all of them run at once: one 16-block cluster per row or per group
// of 8 rows keeps every load of the launch in flight from the start. Beyond, they would run in
// waves of one latency chain each, so the row clusters, which stream their chunks with two
// blocks per SM, take over.
HcPreKernel choose_pre_kernel(const HcPreResidency& residency, const HcParams& params,
                              std::int64_t rows, bool vector_loads) {
  if (!fits_cluster_kernels(params) || !vector_loads) return HcPreKernel::grid;
  if (rows <= residency.single_row_clusters ||
      rows <= std::int64_t{kPreMaxGroupRows} * residency.row_group_clusters) {
    return HcPreKernel::cluster_small_t;
  }
  const int tile_clusters =
      rows <= kWideRows ? residency.tile_clusters_8 : residency.tile_clusters_2;
  return tile_clusters > 0 ? HcPreKernel::row_clusters : HcPreKernel::grid;
}

int small_t_cluster_rows(const HcPreResidency& residency, std::int64_t rows) {
  return rows <= residency.single_row_clusters ? 1 : kPreMaxGroupRows;
}

}  // namespace turbodecode::hc
