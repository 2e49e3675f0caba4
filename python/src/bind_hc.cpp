#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "array_args.h"
#include "bindings.h"
#include "keys.h"
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

void split(const std::string& params, nb::handle mix, nb::handle scale, nb::handle base,
           nb::handle split) {
  const auto p = hc_params(params, "params");
  ArrayArgs a;
  const TensorView m = a.input(mix, "mix"), s = a.input(scale, "scale"), b = a.input(base, "base"),
                   out = a.output(split, "split");
  a.run([&](Stream stream) { hc_split(*p, m, s, b, out, stream); });
}

void collapse(const std::string& params, nb::handle x, nb::handle pre, nb::handle out) {
  const auto p = hc_params(params, "params");
  ArrayArgs a;
  const TensorView xx = a.input(x, "x"), pp = a.input(pre, "pre"), o = a.output(out, "out");
  a.run([&](Stream stream) { hc_collapse(*p, xx, pp, o, stream); });
}

void rms_norm(const std::string& params, nb::handle u, nb::handle weight, nb::handle out) {
  const auto p = hc_params(params, "params");
  ArrayArgs a;
  const TensorView uu = a.input(u, "u"), w = a.input(weight, "weight"), o = a.output(out, "out");
  a.run([&](Stream stream) { hc_rms_norm(*p, uu, w, o, stream); });
}

void split_collapse(const std::string& params, nb::handle mix, nb::handle scale, nb::handle base,
                    nb::handle x, nb::handle split, nb::handle collapsed) {
  const auto p = hc_params(params, "params");
  ArrayArgs a;
  const TensorView m = a.input(mix, "mix"), s = a.input(scale, "scale"), b = a.input(base, "base"),
                   xx = a.input(x, "x"), sp = a.output(split, "split"),
                   c = a.output(collapsed, "collapsed");
  a.run([&](Stream stream) { hc_split_collapse(*p, m, s, b, xx, sp, c, stream); });
}

void split_collapse_norm(const std::string& params, nb::handle mix, nb::handle scale,
                         nb::handle base, nb::handle x, nb::handle norm_weight, nb::handle split,
                         nb::handle collapsed, nb::handle normed) {
  const auto p = hc_params(params, "params");
  ArrayArgs a;
  const TensorView m = a.input(mix, "mix"), s = a.input(scale, "scale"), b = a.input(base, "base"),
                   xx = a.input(x, "x"), w = a.input(norm_weight, "norm_weight"),
                   sp = a.output(split, "split"), c = a.output(collapsed, "collapsed"),
                   n = a.output(normed, "normed");
  a.run([&](Stream stream) { hc_split_collapse_norm(*p, m, s, b, xx, w, sp, c, n, stream); });
}

void expand(const std::string& params, nb::handle block, nb::handle add, nb::handle x,
            nb::handle post, nb::handle comb, nb::handle out) {
  const auto p = hc_params(params, "params");
  ArrayArgs a;
  const TensorView bl = a.input(block, "block"), ad = a.optional_input(add, "add"),
                   xx = a.input(x, "x"), po = a.input(post, "post"), co = a.input(comb, "comb"),
                   o = a.output(out, "out");
  a.run([&](Stream stream) { hc_expand(*p, bl, ad, xx, po, co, o, stream); });
}

void head_weights(const std::string& params, float post_scale, nb::handle logits, nb::handle scale,
                  nb::handle base, nb::handle weights) {
  const auto p = hc_params(params, "params");
  ArrayArgs a;
  const TensorView l = a.input(logits, "logits"), s = a.input(scale, "scale"),
                   b = a.input(base, "base"), w = a.output(weights, "weights");
  a.run([&](Stream stream) { hc_head_weights(*p, post_scale, l, s, b, w, stream); });
}

void norm_mix(const std::string& plan, nb::handle x, nb::handle mix_weight, nb::handle mix,
              nb::handle workspace) {
  const auto p = hc_pre_plan(plan, "plan");
  ArrayArgs a;
  const TensorView xx = a.input(x, "x"), w = a.input(mix_weight, "mix_weight"),
                   m = a.output(mix, "mix"), ws = a.optional_output(workspace, "workspace");
  a.run([&](Stream stream) { hc_norm_mix(*p, xx, w, m, ws, stream); });
}

void pre(const std::string& plan, nb::handle x, nb::handle mix_weight, nb::handle scale,
         nb::handle base, nb::handle norm_weight, nb::handle mix, nb::handle split,
         nb::handle collapsed, nb::handle normed, nb::handle workspace) {
  const auto p = hc_pre_plan(plan, "plan");
  ArrayArgs a;
  const TensorView xx = a.input(x, "x"), w = a.input(mix_weight, "mix_weight"),
                   s = a.input(scale, "scale"), b = a.input(base, "base"),
                   nw = a.input(norm_weight, "norm_weight"), m = a.output(mix, "mix"),
                   sp = a.output(split, "split"), c = a.output(collapsed, "collapsed"),
                   n = a.output(normed, "normed"), ws = a.optional_output(workspace, "workspace");
  a.run([&](Stream stream) { hc_pre(*p, xx, w, s, b, nw, m, sp, c, n, ws, stream); });
}

void expand_q8(const std::string& params, nb::handle weight, nb::handle input, nb::handle block,
               nb::handle x, nb::handle post, nb::handle comb, nb::handle out) {
  const auto p = hc_params(params, "params");
  ArrayArgs a;
  const TensorView w = a.input(weight, "weight"), in = a.input(input, "input"),
                   bl = a.output(block, "block"), xx = a.input(x, "x"), po = a.input(post, "post"),
                   co = a.input(comb, "comb"), o = a.output(out, "out");
  a.run([&](Stream stream) { hc_expand_q8(*p, w, in, bl, xx, po, co, o, stream); });
}

void expand_shared_q8(const std::string& params, nb::handle weight, nb::handle input,
                      nb::handle routed, nb::handle shared, nb::handle x, nb::handle post,
                      nb::handle comb, nb::handle out) {
  const auto p = hc_params(params, "params");
  ArrayArgs a;
  const TensorView w = a.input(weight, "weight"), in = a.input(input, "input"),
                   r = a.input(routed, "routed"), sh = a.output(shared, "shared"),
                   xx = a.input(x, "x"), po = a.input(post, "post"), co = a.input(comb, "comb"),
                   o = a.output(out, "out");
  a.run([&](Stream stream) { hc_expand_shared_q8(*p, w, in, r, sh, xx, po, co, o, stream); });
}

}  // namespace

void bind_hc(nb::module_& m) {
  m.attr("MAX_HC_STREAMS") = kMaxHcStreams;
  m.def("hc_mix_width", &hc_mix_width, "n_hc"_a, "M = 2·n + n²: pre, post and the comb matrix.");
  m.def("hc_params_key", &params_key, "n_hc"_a, "embd"_a, "sinkhorn_iters"_a, "eps"_a, "norm_eps"_a,
        "The key of an HcParams.");
  m.def("plan_hc_pre", &pre_plan, "params"_a, "max_rows"_a, "device"_a,
        "Plans norm-mix / HC-pre (hc.h, plan_hc_pre); returns the plan's fields and its key.");
  m.def("hc_split", &split, "params"_a, "mix"_a, "scale"_a, "base"_a, "split"_a);
  m.def("hc_collapse", &collapse, "params"_a, "x"_a, "pre"_a, "out"_a);
  m.def("hc_rms_norm", &rms_norm, "params"_a, "u"_a, "weight"_a, "out"_a);
  m.def("hc_split_collapse", &split_collapse, "params"_a, "mix"_a, "scale"_a, "base"_a, "x"_a,
        "split"_a, "collapsed"_a);
  m.def("hc_split_collapse_norm", &split_collapse_norm, "params"_a, "mix"_a, "scale"_a, "base"_a,
        "x"_a, "norm_weight"_a, "split"_a, "collapsed"_a, "normed"_a);
  m.def("hc_expand", &expand, "params"_a, "block"_a, "add"_a.none(), "x"_a, "post"_a, "comb"_a,
        "out"_a);
  m.def("hc_head_weights", &head_weights, "params"_a, "post_scale"_a, "logits"_a, "scale"_a,
        "base"_a, "weights"_a);
  m.def("hc_norm_mix", &norm_mix, "plan"_a, "x"_a, "mix_weight"_a, "mix"_a, "workspace"_a.none());
  m.def("hc_pre", &pre, "plan"_a, "x"_a, "mix_weight"_a, "scale"_a, "base"_a, "norm_weight"_a,
        "mix"_a, "split"_a, "collapsed"_a, "normed"_a, "workspace"_a.none());
  m.def("hc_expand_q8", &expand_q8, "params"_a, "weight"_a, "input"_a, "block"_a, "x"_a, "post"_a,
        "comb"_a, "out"_a);
  m.def("hc_expand_shared_q8", &expand_shared_q8, "params"_a, "weight"_a, "input"_a, "routed"_a,
        "shared"_a, "x"_a, "post"_a, "comb"_a, "out"_a);
}

}  // namespace turbodecode::python
