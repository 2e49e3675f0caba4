// One validation function per HC operator (SPEC §7), shared by the CPU and CUDA backends: each
// checks every tensor and returns the raw arguments the backends run on.
#pragma once

#include "hc/hc_args.h"
#include "q8/q8_args.h"
#include "turbodecode/hc.h"

namespace turbodecode::hc {

struct PreArgs {
  NormMixArgs norm_mix;
  SplitCollapseArgs split_collapse;
};

struct ExpandQ8Args {
  q8::MatvecArgs matvec;  // its output is expand.block (attention) or expand.add (shared)
  ExpandArgs expand;
};

SplitArgs validate_split(const HcParams& params, const TensorView& mix, const TensorView& scale,
                         const TensorView& base, const TensorView& split);
CollapseArgs validate_collapse(const HcParams& params, const TensorView& x, const TensorView& pre,
                               const TensorView& out);
RmsNormArgs validate_rms_norm(const HcParams& params, const TensorView& u, const TensorView& weight,
                              const TensorView& out);
// norm_weight and normed absent: split + collapse only.
SplitCollapseArgs validate_split_collapse(const HcParams& params, const TensorView& mix,
                                          const TensorView& scale, const TensorView& base,
                                          const TensorView& x, const TensorView& norm_weight,
                                          const TensorView& split, const TensorView& collapsed,
                                          const TensorView& normed);
ExpandArgs validate_expand(const HcParams& params, const TensorView& block, const TensorView& add,
                           const TensorView& x, const TensorView& post, const TensorView& comb,
                           const TensorView& out);
HeadWeightsArgs validate_head_weights(const HcParams& params, float post_scale,
                                      const TensorView& logits, const TensorView& scale,
                                      const TensorView& base, const TensorView& weights);
// The parameters and row count a plan is made for, checked before they size its workspace.
void validate_pre_sizes(const HcParams& params, std::int64_t max_rows);
void validate_plan(const HcPrePlan& plan);
NormMixArgs validate_norm_mix(const HcPrePlan& plan, const TensorView& x,
                              const TensorView& mix_weight, const TensorView& mix,
                              const TensorView& workspace);
PreArgs validate_pre(const HcPrePlan& plan, const TensorView& x, const TensorView& mix_weight,
                     const TensorView& scale, const TensorView& base, const TensorView& norm_weight,
                     const TensorView& mix, const TensorView& split, const TensorView& collapsed,
                     const TensorView& normed, const TensorView& workspace);
// `block` is the matvec output; with `routed` present it is the shared-expert output, added
// to routed in the expand.
ExpandQ8Args validate_expand_q8(const HcParams& params, const TensorView& weight,
                                const TensorView& input, const TensorView& routed,
                                const TensorView& block, const TensorView& x,
                                const TensorView& post, const TensorView& comb,
                                const TensorView& out);

}  // namespace turbodecode::hc
