// norm-mix and HC-pre on thread-block clusters, one per row (hc_pre_cluster.cu): the launch for
// small T. Each call launches and returns true when the problem and the device allow it, and
// returns false without launching otherwise (the caller then takes the grid kernel).
#pragma once

#include <cstdint>

#include "hc/hc_args.h"
#include "hc/validate_hc.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

// Up to this many rows one cluster per row beats the grid kernel. H200, 2026-11-30, CUDA graph
// µs, cluster / grid: HC-pre 8.4 / 12.7 at T = 1, 19.3 / 36.7 at T = 16, 29.8 / 28.6 at T = 24.
inline constexpr std::int64_t kClusterPreMaxRows = 16;

bool hc_norm_mix_on_cluster(const hc::NormMixArgs& args, Stream stream);
bool hc_pre_on_cluster(const hc::PreArgs& args, Stream stream);

}  // namespace turbodecode::cuda
