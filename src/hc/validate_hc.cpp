#include "hc/validate_hc.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "common/validate.h"
#include "hc/pre_workspace.h"
#include "q8/validate_q8.h"

namespace turbodecode::hc {
namespace {

// Far beyond the 20 of DeepSeek-V4; bounds the serial part of a split.
constexpr int kMaxSinkhornIters = 1000;
// Row groups lie on the CUDA grid's y axis.
constexpr std::int64_t kMaxPreRows = std::int64_t{65535} * kPreGroupRows;

void check_params(const HcParams& params) {
  check_arg(params.n_hc >= 1 && params.n_hc <= kMaxHcStreams, "n_hc",
            "must be in [1, 16], is " + std::to_string(params.n_hc));
  check_arg(params.embd >= 1, "embd", "must be positive");
  check_arg(params.embd < (std::int64_t{1} << 31) / params.n_hc, "embd",
            "n_hc·embd must be below 2^31");
  check_arg(params.sinkhorn_iters >= 1 && params.sinkhorn_iters <= kMaxSinkhornIters,
            "sinkhorn_iters", "must be in [1, " + std::to_string(kMaxSinkhornIters) + "]");
  check_arg(std::isfinite(params.eps) && params.eps >= 0.0f, "eps", "must be finite and >= 0");
  check_arg(std::isfinite(params.norm_eps) && params.norm_eps > 0.0f, "norm_eps",
            "must be finite and > 0");
}

// The first tensor of a call fixes the device and the row count T.
Device device_and_rows(const TensorView& t, std::string_view name, int rank, std::int64_t* rows) {
  check_arg(t.data != nullptr, name, "must not be null");
  check_arg(t.rank == rank, name, "must have " + std::to_string(rank) + " dimensions");
  check_backend(t.device);
  *rows = t.shape[0];
  check_arg(*rows >= 1, name, "must have at least one row");
  return t.device;
}

RowsIn rows_in(const TensorView& t) {
  return {t.as<const float>(), t.strides[0]};
}
RowsOut rows_out(const TensorView& t) {
  return {t.as<float>(), t.strides[0]};
}
StateIn state_in(const TensorView& t) {
  return {t.as<const float>(), t.strides[0], t.strides[1]};
}
StateOut state_out(const TensorView& t) {
  return {t.as<float>(), t.strides[0], t.strides[1]};
}
WeightsIn weights_in(const TensorView& t) {
  return {t.as<const float>(), t.strides[0], t.strides[1]};
}
CombIn comb_in(const TensorView& t) {
  return {t.as<const float>(), t.strides[0], t.strides[1], t.strides[2]};
}

void check_split_inputs(const HcParams& params, Device device, std::int64_t rows,
                        const TensorView& mix, const TensorView& scale, const TensorView& base) {
  const int m = hc_mix_width(params.n_hc);
  check_rows(mix, "mix", device, DType::f32, {rows, m});
  check_rows(scale, "scale", device, DType::f32, {3});
  check_rows(base, "base", device, DType::f32, {m});
}

void check_state(const HcParams& params, Device device, std::int64_t rows, const TensorView& x,
                 std::string_view name) {
  check_rows(x, name, device, DType::f32, {rows, params.n_hc, params.embd});
}

// Every output must be disjoint from every input and from the other outputs.
void check_all_disjoint(std::initializer_list<std::pair<const TensorView*, const char*>> outputs,
                        std::initializer_list<std::pair<const TensorView*, const char*>> inputs) {
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    for (const auto& in : inputs) check_disjoint(*out->first, out->second, *in.first, in.second);
    for (auto other = std::next(out); other != outputs.end(); ++other) {
      check_disjoint(*out->first, out->second, *other->first, other->second);
    }
  }
}

// The workspace as the overlap checks see it: a plan that needs none ignores the view it is
// passed, unchecked, so its shape and strides never reach them.
TensorView used_workspace(const HcPrePlan& plan, const TensorView& workspace) {
  return plan.workspace_bytes > 0 ? workspace : TensorView{};
}

SplitArgs split_args(const HcParams& params, std::int64_t rows, const TensorView& mix,
                     const TensorView& scale, const TensorView& base, const TensorView& split) {
  SplitArgs args;
  args.rows = rows;
  args.n_hc = params.n_hc;
  args.iters = params.sinkhorn_iters;
  args.eps = params.eps;
  args.mix = rows_in(mix);
  args.scale = scale.as<const float>();
  args.base = base.as<const float>();
  args.split = rows_out(split);
  return args;
}

}  // namespace

SplitArgs validate_split(const HcParams& params, const TensorView& mix, const TensorView& scale,
                         const TensorView& base, const TensorView& split) {
  check_params(params);
  std::int64_t rows = 0;
  const Device device = device_and_rows(mix, "mix", 2, &rows);
  check_split_inputs(params, device, rows, mix, scale, base);
  check_rows(split, "split", device, DType::f32, {rows, hc_mix_width(params.n_hc)});
  check_all_disjoint({{&split, "split"}}, {{&mix, "mix"}, {&scale, "scale"}, {&base, "base"}});
  return split_args(params, rows, mix, scale, base, split);
}

CollapseArgs validate_collapse(const HcParams& params, const TensorView& x, const TensorView& pre,
                               const TensorView& out) {
  check_params(params);
  std::int64_t rows = 0;
  const Device device = device_and_rows(x, "x", 3, &rows);
  check_state(params, device, rows, x, "x");
  check_tensor(pre, "pre", device, DType::f32, {rows, params.n_hc});
  check_rows(out, "out", device, DType::f32, {rows, params.embd});
  check_all_disjoint({{&out, "out"}}, {{&x, "x"}, {&pre, "pre"}});
  return {rows, params.n_hc, params.embd, state_in(x), weights_in(pre), rows_out(out)};
}

RmsNormArgs validate_rms_norm(const HcParams& params, const TensorView& u, const TensorView& weight,
                              const TensorView& out) {
  check_params(params);
  std::int64_t rows = 0;
  const Device device = device_and_rows(u, "u", 2, &rows);
  check_rows(u, "u", device, DType::f32, {rows, params.embd});
  check_rows(weight, "weight", device, DType::f32, {params.embd});
  check_rows(out, "out", device, DType::f32, {rows, params.embd});
  check_all_disjoint({{&out, "out"}}, {{&u, "u"}, {&weight, "weight"}});
  return {rows, params.embd, params.norm_eps, rows_in(u), weight.as<const float>(), rows_out(out)};
}

SplitCollapseArgs validate_split_collapse(const HcParams& params, const TensorView& mix,
                                          const TensorView& scale, const TensorView& base,
                                          const TensorView& x, const TensorView& norm_weight,
                                          const TensorView& split, const TensorView& collapsed,
                                          const TensorView& normed) {
  check_params(params);
  std::int64_t rows = 0;
  const Device device = device_and_rows(mix, "mix", 2, &rows);
  check_split_inputs(params, device, rows, mix, scale, base);
  check_state(params, device, rows, x, "x");
  check_rows(split, "split", device, DType::f32, {rows, hc_mix_width(params.n_hc)});
  check_rows(collapsed, "collapsed", device, DType::f32, {rows, params.embd});
  const bool with_norm = normed.present() || norm_weight.present();
  if (with_norm) {
    check_rows(norm_weight, "norm_weight", device, DType::f32, {params.embd});
    check_rows(normed, "normed", device, DType::f32, {rows, params.embd});
  }
  check_all_disjoint({{&split, "split"}, {&collapsed, "collapsed"}, {&normed, "normed"}},
                     {{&mix, "mix"},
                      {&scale, "scale"},
                      {&base, "base"},
                      {&x, "x"},
                      {&norm_weight, "norm_weight"}});
  SplitCollapseArgs args;
  args.split = split_args(params, rows, mix, scale, base, split);
  args.collapse = {rows, params.n_hc, params.embd, state_in(x), {}, rows_out(collapsed)};
  if (with_norm) {
    args.norm = {
        rows, params.embd, params.norm_eps, {}, norm_weight.as<const float>(), rows_out(normed)};
  }
  return args;
}

ExpandArgs validate_expand(const HcParams& params, const TensorView& block, const TensorView& add,
                           const TensorView& x, const TensorView& post, const TensorView& comb,
                           const TensorView& out) {
  check_params(params);
  std::int64_t rows = 0;
  const Device device = device_and_rows(x, "x", 3, &rows);
  check_state(params, device, rows, x, "x");
  check_rows(block, "block", device, DType::f32, {rows, params.embd});
  if (add.present()) check_rows(add, "add", device, DType::f32, {rows, params.embd});
  check_tensor(post, "post", device, DType::f32, {rows, params.n_hc});
  check_tensor(comb, "comb", device, DType::f32, {rows, params.n_hc, params.n_hc});
  check_state(params, device, rows, out, "out");
  check_all_disjoint(
      {{&out, "out"}},
      {{&block, "block"}, {&add, "add"}, {&x, "x"}, {&post, "post"}, {&comb, "comb"}});
  ExpandArgs args;
  args.rows = rows;
  args.n_hc = params.n_hc;
  args.embd = params.embd;
  args.block = rows_in(block);
  if (add.present()) args.add = rows_in(add);
  args.x = state_in(x);
  args.post = weights_in(post);
  args.comb = comb_in(comb);
  args.out = state_out(out);
  return args;
}

HeadWeightsArgs validate_head_weights(const HcParams& params, float post_scale,
                                      const TensorView& logits, const TensorView& scale,
                                      const TensorView& base, const TensorView& weights) {
  check_params(params);
  check_arg(std::isfinite(post_scale), "post_scale", "must be finite");
  std::int64_t rows = 0;
  const Device device = device_and_rows(logits, "logits", 2, &rows);
  check_tensor(logits, "logits", device, DType::f32, {rows, params.n_hc});
  check_rows(scale, "scale", device, DType::f32, {1});
  check_rows(base, "base", device, DType::f32, {params.n_hc});
  check_tensor(weights, "weights", device, DType::f32, {rows, params.n_hc});
  check_all_disjoint({{&weights, "weights"}},
                     {{&logits, "logits"}, {&scale, "scale"}, {&base, "base"}});
  HeadWeightsArgs args;
  args.rows = rows;
  args.n_hc = params.n_hc;
  args.post_scale = post_scale;
  args.eps = params.eps;
  args.logits = weights_in(logits);
  args.scale = scale.as<const float>();
  args.base = base.as<const float>();
  args.weights = weights.as<float>();
  args.weights_row_stride = weights.strides[0];
  args.weights_stream_stride = weights.strides[1];
  return args;
}

void validate_pre_sizes(const HcParams& params, std::int64_t max_rows) {
  check_params(params);
  check_arg(max_rows >= 1 && max_rows <= kMaxPreRows, "max_rows",
            "must be in [1, " + std::to_string(kMaxPreRows) + "]");
}

void validate_plan(const HcPrePlan& plan) {
  validate_pre_sizes(plan.params, plan.max_rows);
  const std::int64_t width = plan.params.n_hc * plan.params.embd;
  const std::int64_t expected =
      plan.device == Device::cpu
          ? 0
          : pre_workspace_bytes(plan.max_rows, pre_chunks(width), hc_mix_width(plan.params.n_hc));
  const auto plausible = [&](const HcPreResidency& r) {
    const bool none = r.single_row_clusters == 0 && r.row_group_clusters == 0 &&
                      r.tile_clusters_8 == 0 && r.tile_clusters_2 == 0;
    const bool counts = r.single_row_clusters >= 0 && r.row_group_clusters >= 0 &&
                        r.tile_clusters_8 >= 0 && r.tile_clusters_2 >= 0;
    return plan.device == Device::cpu ? none : counts;
  };
  check_arg(plan.chunks == (plan.device == Device::cpu ? 1 : pre_chunks(width)) &&
                plan.workspace_bytes == expected && plausible(plan.norm_mix_residency) &&
                plausible(plan.pre_residency),
            "plan", "was not made by plan_hc_pre for these parameters");
}

NormMixArgs validate_norm_mix(const HcPrePlan& plan, const TensorView& x,
                              const TensorView& mix_weight, const TensorView& mix,
                              const TensorView& workspace) {
  validate_plan(plan);
  const HcParams& params = plan.params;
  std::int64_t rows = 0;
  const Device device = device_and_rows(x, "x", 3, &rows);
  check_arg(device == plan.device, "x", "must live on the plan's device");
  check_arg(rows <= plan.max_rows, "x",
            "has more rows than the plan's max_rows (" + std::to_string(plan.max_rows) + ")");
  check_state(params, device, rows, x, "x");
  const int m = hc_mix_width(params.n_hc);
  check_rows(mix_weight, "mix_weight", device, DType::f16, {m, params.n_hc * params.embd});
  check_rows(mix, "mix", device, DType::f32, {rows, m});
  if (plan.workspace_bytes > 0) {
    check_rows(workspace, "workspace", device, DType::u8, {kAnyExtent});
    check_arg(workspace.shape[0] >= plan.workspace_bytes, "workspace",
              "must hold plan.workspace_bytes = " + std::to_string(plan.workspace_bytes));
    check_arg(reinterpret_cast<std::uintptr_t>(workspace.data) % 16 == 0, "workspace",
              "must be 16-byte aligned");
  }
  const TensorView checked_workspace = used_workspace(plan, workspace);
  check_all_disjoint({{&mix, "mix"}, {&checked_workspace, "workspace"}},
                     {{&x, "x"}, {&mix_weight, "mix_weight"}});
  NormMixArgs args;
  args.rows = rows;
  args.n_hc = params.n_hc;
  args.embd = params.embd;
  args.mix_width = m;
  args.eps = params.norm_eps;
  args.x = state_in(x);
  args.weight = mix_weight.as<const std::uint16_t>();
  args.weight_stride = mix_weight.strides[0];
  args.mix = rows_out(mix);
  return args;
}

PreArgs validate_pre(const HcPrePlan& plan, const TensorView& x, const TensorView& mix_weight,
                     const TensorView& scale, const TensorView& base, const TensorView& norm_weight,
                     const TensorView& mix, const TensorView& split, const TensorView& collapsed,
                     const TensorView& normed, const TensorView& workspace) {
  PreArgs args;
  args.norm_mix = validate_norm_mix(plan, x, mix_weight, mix, workspace);
  check_rows(norm_weight, "norm_weight", x.device, DType::f32, {plan.params.embd});
  check_rows(normed, "normed", x.device, DType::f32, {args.norm_mix.rows, plan.params.embd});
  // mix is an output here, read back only by the launch that wrote it.
  args.split_collapse = validate_split_collapse(plan.params, mix, scale, base, x, norm_weight,
                                                split, collapsed, normed);
  const TensorView* outputs[] = {&mix, &split, &collapsed, &normed};
  const TensorView checked_workspace = used_workspace(plan, workspace);
  for (const TensorView* out : outputs) {
    check_disjoint(*out, "output", checked_workspace, "workspace");
    check_disjoint(*out, "output", mix_weight, "mix_weight");
  }
  return args;
}

ExpandQ8Args validate_expand_q8(const HcParams& params, const TensorView& weight,
                                const TensorView& input, const TensorView& routed,
                                const TensorView& block, const TensorView& x,
                                const TensorView& post, const TensorView& comb,
                                const TensorView& out) {
  ExpandQ8Args args;
  args.matvec = q8::validate_q8_operands(weight, input);
  check_arg(args.matvec.out_rows == params.embd, "weight",
            "must have embd = " + std::to_string(params.embd) + " rows");
  const bool shared = routed.present();
  check_rows(block, shared ? "shared" : "block", input.device, DType::f32,
             {args.matvec.tokens, params.embd});
  args.matvec.out = block.as<float>();
  args.matvec.out_stride = block.strides[0];
  args.expand = shared ? validate_expand(params, routed, block, x, post, comb, out)
                       : validate_expand(params, block, {}, x, post, comb, out);
  check_arg(args.expand.rows == args.matvec.tokens, "input", "must have as many rows as x");
  check_all_disjoint({{&block, shared ? "shared" : "block"}, {&out, "out"}}, {{&weight, "weight"},
                                                                              {&input, "input"},
                                                                              {&x, "x"},
                                                                              {&post, "post"},
                                                                              {&comb, "comb"},
                                                                              {&routed, "routed"}});
  return args;
}

}  // namespace turbodecode::hc
