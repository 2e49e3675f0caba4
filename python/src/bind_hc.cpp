#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "array_args.h"
#include "bindings.h"
#include "keys.h"
#include "operators.h"
#include "turbodecode/hc.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace turbodecode::python {
namespace {

std::string params_key(int n_hc, std::int64_t embd, int sinkhorn_iters, float eps, float norm_eps) {
  return hc_params_key({n_hc, embd, sinkhorn_iters, eps, norm_eps});
}

nb::dict pre_plan(const std::string& params, std::int64_t max_rows, const std::string& device) {
  const std::string key =
      hc_pre_plan_key(*hc_params(params, "params"), max_rows, parse_device(device, "device"));
  const auto plan = hc_pre_plan(key, "plan");
  nb::dict fields;
  fields["key"] = key;
  fields["chunks"] = plan->chunks;
  fields["workspace_bytes"] = plan->workspace_bytes;
  return fields;
}

}  // namespace

void bind_hc(nb::module_& m) {
  m.attr("MAX_HC_STREAMS") = kMaxHcStreams;
  m.def("hc_mix_width", &hc_mix_width, "n_hc"_a, "M = 2·n + n²: pre, post and the comb matrix.");
  m.def("hc_params_key", &params_key, "n_hc"_a, "embd"_a, "sinkhorn_iters"_a, "eps"_a, "norm_eps"_a,
        "The key of an HcParams.");
  m.def("plan_hc_pre", &pre_plan, "params"_a, "max_rows"_a, "device"_a,
        "Plans norm-mix / HC-pre (hc.h, plan_hc_pre); returns the plan's fields and its key.");
  m.def("hc_split", &ops::hc_split<ArrayArgs>, "params"_a, "mix"_a, "scale"_a, "base"_a, "split"_a);
  m.def("hc_collapse", &ops::hc_collapse<ArrayArgs>, "params"_a, "x"_a, "pre"_a, "out"_a);
  m.def("hc_rms_norm", &ops::hc_rms_norm<ArrayArgs>, "params"_a, "u"_a, "weight"_a, "out"_a);
  m.def("hc_split_collapse", &ops::hc_split_collapse<ArrayArgs>, "params"_a, "mix"_a, "scale"_a,
        "base"_a, "x"_a, "split"_a, "collapsed"_a);
  m.def("hc_split_collapse_norm", &ops::hc_split_collapse_norm<ArrayArgs>, "params"_a, "mix"_a,
        "scale"_a, "base"_a, "x"_a, "norm_weight"_a, "split"_a, "collapsed"_a, "normed"_a);
  m.def("hc_expand", &ops::hc_expand<ArrayArgs>, "params"_a, "block"_a, "add"_a.none(), "x"_a,
        "post"_a, "comb"_a, "out"_a);
  m.def("hc_head_weights", &ops::hc_head_weights<ArrayArgs>, "params"_a, "post_scale"_a, "logits"_a,
        "scale"_a, "base"_a, "weights"_a);
  m.def("hc_norm_mix", &ops::hc_norm_mix<ArrayArgs>, "plan"_a, "x"_a, "mix_weight"_a, "mix"_a,
        "workspace"_a.none());
  m.def("hc_pre", &ops::hc_pre<ArrayArgs>, "plan"_a, "x"_a, "mix_weight"_a, "scale"_a, "base"_a,
        "norm_weight"_a, "mix"_a, "split"_a, "collapsed"_a, "normed"_a, "workspace"_a.none());
  m.def("hc_expand_q8", &ops::hc_expand_q8<ArrayArgs>, "params"_a, "weight"_a, "input"_a, "block"_a,
        "x"_a, "post"_a, "comb"_a, "out"_a);
  m.def("hc_expand_shared_q8", &ops::hc_expand_shared_q8<ArrayArgs>, "params"_a, "weight"_a,
        "input"_a, "routed"_a, "shared"_a, "x"_a, "post"_a, "comb"_a, "out"_a);
}

}  // namespace turbodecode::python
