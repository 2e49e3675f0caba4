// The CPU backend of the HC operators. Fused operators call the same per-row functions as
// their unfused parts, in the same order, so their results are bitwise equal.
#pragma once

#include "hc/hc_args.h"
#include "hc/validate_hc.h"

namespace turbodecode::hc {

void split_cpu(const SplitArgs& args);
void collapse_cpu(const CollapseArgs& args);
void rms_norm_cpu(const RmsNormArgs& args);
void split_collapse_cpu(const SplitCollapseArgs& args);
void expand_cpu(const ExpandArgs& args);
void head_weights_cpu(const HeadWeightsArgs& args);
void norm_mix_cpu(const NormMixArgs& args);
void pre_cpu(const PreArgs& args);
void expand_q8_cpu(const ExpandQ8Args& args);

}  // namespace turbodecode::hc
