// norm-mix and HC-pre on thread-block clusters, one per row or group of rows
// (hc_pre_cluster.cu). Each call launches and returns true when the problem and the device allow
// it, and returns false without launching otherwise (the caller then takes the grid kernel).
#pragma once

#include <cstdint>

#include "hc/hc_args.h"
#include "hc/validate_hc.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

bool hc_norm_mix_on_cluster(const hc::NormMixArgs& args, Stream stream);
bool hc_pre_on_cluster(const hc::PreArgs& args, Stream stream);

}  // namespace turbodecode::cuda
