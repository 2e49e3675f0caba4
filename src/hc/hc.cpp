// Public entry points of the HC operators: validate (validate_hc.cpp), then dispatch on the
// tensors' device.
#include "turbodecode/hc.h"

#include <string>

#include "common/validate.h"
#include "hc/cuda/hc_cuda.h"
#include "hc/hc_cpu.h"
#include "hc/pre_kernel.h"
#include "hc/pre_workspace.h"
#include "hc/validate_hc.h"

namespace turbodecode {
namespace {

// Runs a call's CPU or CUDA backend, by the device its tensors live on (validation has rejected
// CUDA tensors where the CUDA backend is not compiled in, and there on_cuda is never called).
template <class OnCpu, class OnCuda>
void run_on([[maybe_unused]] Device device, const OnCpu& on_cpu,
            [[maybe_unused]] const OnCuda& on_cuda) {
#ifdef TURBODECODE_WITH_CUDA
  if (device == Device::cuda) {
    on_cuda();
    return;
  }
#endif
  on_cpu();
}

}  // namespace

void hc_split(const HcParams& params, const TensorView& mix, const TensorView& scale,
              const TensorView& base, const TensorView& split, Stream stream) {
  const auto args = hc::validate_split(params, mix, scale, base, split);
  run_on(
      mix.device, [&] { hc::split_cpu(args); }, [&] { cuda::hc_split(args, stream); });
}

void hc_collapse(const HcParams& params, const TensorView& x, const TensorView& pre,
                 const TensorView& out, Stream stream) {
  const auto args = hc::validate_collapse(params, x, pre, out);
  run_on(
      x.device, [&] { hc::collapse_cpu(args); }, [&] { cuda::hc_collapse(args, stream); });
}

void hc_rms_norm(const HcParams& params, const TensorView& u, const TensorView& weight,
                 const TensorView& out, Stream stream) {
  const auto args = hc::validate_rms_norm(params, u, weight, out);
  run_on(
      u.device, [&] { hc::rms_norm_cpu(args); }, [&] { cuda::hc_rms_norm(args, stream); });
}

void hc_split_collapse(const HcParams& params, const TensorView& mix, const TensorView& scale,
                       const TensorView& base, const TensorView& x, const TensorView& split,
                       const TensorView& collapsed, Stream stream) {
  const auto args =
      hc::validate_split_collapse(params, mix, scale, base, x, {}, split, collapsed, {});
  run_on(
      mix.device, [&] { hc::split_collapse_cpu(args); },
      [&] { cuda::hc_split_collapse(args, stream); });
}

void hc_split_collapse_norm(const HcParams& params, const TensorView& mix, const TensorView& scale,
                            const TensorView& base, const TensorView& x,
                            const TensorView& norm_weight, const TensorView& split,
                            const TensorView& collapsed, const TensorView& normed, Stream stream) {
  check_arg(norm_weight.present(), "norm_weight", "must not be null");
  check_arg(normed.present(), "normed", "must not be null");
  const auto args = hc::validate_split_collapse(params, mix, scale, base, x, norm_weight, split,
                                                collapsed, normed);
  run_on(
      mix.device, [&] { hc::split_collapse_cpu(args); },
      [&] { cuda::hc_split_collapse(args, stream); });
}

void hc_expand(const HcParams& params, const TensorView& block, const TensorView& add,
               const TensorView& x, const TensorView& post, const TensorView& comb,
               const TensorView& out, Stream stream) {
  const auto args = hc::validate_expand(params, block, add, x, post, comb, out);
  run_on(
      x.device, [&] { hc::expand_cpu(args); }, [&] { cuda::hc_expand(args, stream); });
}

void hc_head_weights(const HcParams& params, float post_scale, const TensorView& logits,
                     const TensorView& scale, const TensorView& base, const TensorView& weights,
                     Stream stream) {
  const auto args = hc::validate_head_weights(params, post_scale, logits, scale, base, weights);
  run_on(
      logits.device, [&] { hc::head_weights_cpu(args); },
      [&] { cuda::hc_head_weights(args, stream); });
}

HcPrePlan plan_hc_pre(const HcParams& params, std::int64_t max_rows, Device device) {
  check_backend(device);
  hc::validate_pre_sizes(params, max_rows);
  HcPrePlan plan;
  plan.params = params;
  plan.device = device;
  plan.max_rows = max_rows;
  if (device == Device::cuda) {
    const std::int64_t chunks = hc::pre_chunks(params.n_hc * params.embd);
    plan.chunks = static_cast<int>(chunks);
    plan.workspace_bytes = hc::pre_workspace_bytes(max_rows, chunks, hc_mix_width(params.n_hc));
  }
  hc::validate_plan(plan);
#ifdef TURBODECODE_WITH_CUDA
  if (device == Device::cuda) {
    plan.norm_mix_residency = cuda::hc_norm_mix_residency(params);
    plan.pre_residency = cuda::hc_pre_residency(params);
  }
#endif
  return plan;
}

namespace {

HcPreKernel pre_kernel_for(const HcPrePlan& plan, const HcPreResidency& residency,
                           std::int64_t rows) {
  hc::validate_plan(plan);
  check_arg(rows >= 1 && rows <= plan.max_rows, "rows",
            "must be in [1, plan.max_rows = " + std::to_string(plan.max_rows) + "]");
  if (plan.device == Device::cpu) return HcPreKernel::cpu;
  return hc::choose_pre_kernel(residency, plan.params, rows, /*vector_loads=*/true);
}

}  // namespace

HcPreKernel hc_pre_kernel(const HcPrePlan& plan, std::int64_t rows) {
  return pre_kernel_for(plan, plan.pre_residency, rows);
}

HcPreKernel hc_norm_mix_kernel(const HcPrePlan& plan, std::int64_t rows) {
  return pre_kernel_for(plan, plan.norm_mix_residency, rows);
}

void hc_norm_mix(const HcPrePlan& plan, const TensorView& x, const TensorView& mix_weight,
                 const TensorView& mix, const TensorView& workspace, Stream stream) {
  const auto args = hc::validate_norm_mix(plan, x, mix_weight, mix, workspace);
  run_on(
      x.device, [&] { hc::norm_mix_cpu(args); },
      [&] { cuda::hc_norm_mix(plan, args, workspace.data, stream); });
}

void hc_pre(const HcPrePlan& plan, const TensorView& x, const TensorView& mix_weight,
            const TensorView& scale, const TensorView& base, const TensorView& norm_weight,
            const TensorView& mix, const TensorView& split, const TensorView& collapsed,
            const TensorView& normed, const TensorView& workspace, Stream stream) {
  const auto args = hc::validate_pre(plan, x, mix_weight, scale, base, norm_weight, mix, split,
                                     collapsed, normed, workspace);
  run_on(
      x.device, [&] { hc::pre_cpu(args); },
      [&] { cuda::hc_pre(plan, args, workspace.data, stream); });
}

void hc_expand_q8(const HcParams& params, const TensorView& weight, const TensorView& input,
                  const TensorView& block, const TensorView& x, const TensorView& post,
                  const TensorView& comb, const TensorView& out, Stream stream) {
  const auto args = hc::validate_expand_q8(params, weight, input, {}, block, x, post, comb, out);
  run_on(
      x.device, [&] { hc::expand_q8_cpu(args); }, [&] { cuda::hc_expand_q8(args, stream); });
}

void hc_expand_shared_q8(const HcParams& params, const TensorView& weight, const TensorView& input,
                         const TensorView& routed, const TensorView& shared, const TensorView& x,
                         const TensorView& post, const TensorView& comb, const TensorView& out,
                         Stream stream) {
  check_arg(routed.present(), "routed", "must not be null");
  const auto args =
      hc::validate_expand_q8(params, weight, input, routed, shared, x, post, comb, out);
  run_on(
      x.device, [&] { hc::expand_q8_cpu(args); }, [&] { cuda::hc_expand_q8(args, stream); });
}

}  // namespace turbodecode
