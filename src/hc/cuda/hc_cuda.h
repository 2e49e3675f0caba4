// CUDA backend of the HC operators (called only under TURBODECODE_WITH_CUDA). Arguments were
// validated by the public entry points.
#pragma once

#include "hc/hc_args.h"
#include "hc/validate_hc.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

void hc_split(const hc::SplitArgs& args, Stream stream);
void hc_collapse(const hc::CollapseArgs& args, Stream stream);
void hc_rms_norm(const hc::RmsNormArgs& args, Stream stream);
void hc_split_collapse(const hc::SplitCollapseArgs& args, Stream stream);
void hc_expand(const hc::ExpandArgs& args, Stream stream);
void hc_head_weights(const hc::HeadWeightsArgs& args, Stream stream);
// What the current device runs at once of the norm-mix / HC-pre cluster kernels for these
// parameters (zeros where the cluster kernels do not take them).
HcPreResidency hc_norm_mix_residency(const HcParams& params);
HcPreResidency hc_pre_residency(const HcParams& params);
// The kernel hc::choose_pre_kernel picks, launched. workspace: the plan's zeroed workspace (see
// HcPrePlan).
void hc_norm_mix(const HcPrePlan& plan, const hc::NormMixArgs& args, void* workspace,
                 Stream stream);
void hc_pre(const HcPrePlan& plan, const hc::PreArgs& args, void* workspace, Stream stream);
void hc_expand_q8(const hc::ExpandQ8Args& args, Stream stream);

}  // namespace turbodecode::cuda
