// Which kernel runs a CUDA norm-mix or HC-pre (HcPreKernel in hc.h): decided from the problem,
// T, whether x and W allow 16-byte loads, and what the device runs at once (HcPreResidency,
// found once by plan_hc_pre). Host code, so the CPU tests check the choice without a GPU;
// src/hc/cuda/pre/dispatch.cu launches what it picks (docs/hc.md, "Which kernel runs").
#pragma once

#include <cstdint>

#include "hc/hc_args.h"
#include "turbodecode/hc.h"

namespace turbodecode::hc {

// The cluster kernels are compiled for n_hc = 4 and rows of at most 80 chunks (E ≤ 5120) whose
// 8-column loads never cross a stream (E % 8 = 0).
inline constexpr int kClusterN = 4;
inline constexpr int kClusterMaxEmbd = 5120;
// The row clusters put 8 blocks on a tile of 8 rows up to this T, 2 beyond (docs/hc.md,
// "HC-pre for many rows").
inline constexpr std::int64_t kWideRows = 512;

bool fits_cluster_kernels(const HcParams& params);

// Whether x and W allow the cluster kernels' 16-byte loads: both start 16-byte aligned, x's row
// and stream strides are multiples of 4 floats, W's row stride a multiple of 8 halves.
bool allows_vector_loads(const NormMixArgs& args);

HcPreKernel choose_pre_kernel(const HcPreResidency& residency, const HcParams& params,
                              std::int64_t rows, bool vector_loads);

// Rows per cluster of HcPreKernel::cluster_small_t: one while a cluster per row all run at once,
// else a group of kPreMaxGroupRows.
int small_t_cluster_rows(const HcPreResidency& residency, std::int64_t rows);

}  // namespace turbodecode::hc
