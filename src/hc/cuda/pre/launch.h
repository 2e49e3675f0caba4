// norm-mix and HC-pre on thread-block clusters: while all of a launch's clusters run at once, one
// cluster of 16 blocks per row or group of 8 rows (cluster_small_t.cu); for more rows one cluster
// of 8 blocks per tile of 8 rows (row_clusters.cu). Each call launches and returns true
// when the problem, T and the device allow it, and returns false without launching otherwise;
// the caller tries them in that order, then takes the grid kernel (grid.cu).
#pragma once

#include <cstdint>

#include "hc/hc_args.h"
#include "hc/validate_hc.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

bool hc_norm_mix_on_cluster(const hc::NormMixArgs& args, Stream stream);
bool hc_pre_on_cluster(const hc::PreArgs& args, Stream stream);
bool hc_norm_mix_on_row_clusters(const hc::NormMixArgs& args, Stream stream);
bool hc_pre_on_row_clusters(const hc::PreArgs& args, Stream stream);

}  // namespace turbodecode::cuda
