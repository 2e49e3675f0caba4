// The hyper-connection operators: split, collapse, RMSNorm and their fusions, expand, the
// output-head weights, norm-mix and HC-pre (with their plan), and the Q8_0 expand fusions.
#include <climits>

#include "api/calls.h"
#include "api/operands.h"
#include "turbodecode/error.h"
#include "turbodecode/hc.h"
#include "turbodecode/q8.h"

namespace turbodecode::fuzz {
namespace {

HcParams pick_params(FuzzedDataProvider& data) {
  HcParams p;
  p.n_hc = pick(data, 1, 4, {0, -1, 17, 1 << 20});
  p.embd = pick<std::int64_t>(data, 1, 40, {0, -1, std::int64_t{1} << 40, INT64_MAX});
  p.sinkhorn_iters = pick(data, 1, 25, {0, -1, INT_MAX});
  p.eps = pick_float(data, {1e-6f, 0.0f});
  p.norm_eps = pick_float(data, {1e-6f, 1e-3f});
  return p;
}

// Shapes of every operand, from sane stand-ins for wild parameters.
struct Shapes {
  std::int64_t rows, n, m, e;
  Shapes(const HcParams& p, std::int64_t t)
      : rows(t),
        n(sane(p.n_hc, 1, kMaxHcStreams)),
        m(hc_mix_width(static_cast<int>(n))),
        e(sane(p.embd, 1, 40)) {}
};

// The operands of an expand: x, post, comb and out.
struct ExpandOperands {
  TensorView x, post, comb, out;
  ExpandOperands(Operands& ops, const Shapes& s)
      : x(ops.add(Role::input, DType::f32, {s.rows, s.n, s.e})),
        post(ops.add(Role::input, DType::f32, {s.rows, s.n})),
        comb(ops.add(Role::input, DType::f32, {s.rows, s.n, s.n})),
        out(ops.add(Role::output, DType::f32, {s.rows, s.n, s.e})) {}
};

void fuzz_pre_call(FuzzedDataProvider& data, const HcParams& params, const Shapes& s,
                   bool whole_pre) {
  HcPrePlan plan;
  try {
    plan = plan_hc_pre(params, pick<std::int64_t>(data, 1, 4, {0, -1, INT64_MAX}), Device::cpu);
  } catch (const Error&) {
    return;  // plan_hc_pre writes nothing
  }
  Operands ops(data);
  const TensorView x = ops.add(Role::input, DType::f32, {s.rows, s.n, s.e});
  const TensorView weight = ops.add(Role::input, DType::f16, {s.m, s.n * s.e});
  const TensorView mix = ops.add(Role::output, DType::f32, {s.rows, s.m});
  const TensorView workspace = ops.add(Role::output, DType::u8, {0}, true);
  if (!whole_pre) {
    if (!ops.too_large()) ops.run([&] { hc_norm_mix(plan, x, weight, mix, workspace); });
    return;
  }
  const TensorView scale = ops.add(Role::input, DType::f32, {3});
  const TensorView base = ops.add(Role::input, DType::f32, {s.m});
  const TensorView norm_weight = ops.add(Role::input, DType::f32, {s.e});
  const TensorView split = ops.add(Role::output, DType::f32, {s.rows, s.m});
  const TensorView collapsed = ops.add(Role::output, DType::f32, {s.rows, s.e});
  const TensorView normed = ops.add(Role::output, DType::f32, {s.rows, s.e});
  if (ops.too_large()) return;
  ops.run([&] {
    hc_pre(plan, x, weight, scale, base, norm_weight, mix, split, collapsed, normed, workspace);
  });
}

void fuzz_expand_q8_call(FuzzedDataProvider& data, const HcParams& params, const Shapes& s) {
  const std::int64_t cols = 32 * pick<std::int64_t>(data, 1, 2, {0}) + pick(data, 0, 0, {8});
  Operands ops(data);
  const TensorView weight =
      ops.add(Role::input, DType::u8, {s.e, q8_row_bytes(sane(cols, 32, 64))});
  const TensorView input = ops.add(Role::input, DType::f32, {s.rows, cols});
  const bool shared = data.ConsumeBool();
  const TensorView routed = shared ? ops.add(Role::input, DType::f32, {s.rows, s.e}) : TensorView{};
  const TensorView block = ops.add(Role::output, DType::f32, {s.rows, s.e});
  const ExpandOperands e(ops, s);
  if (ops.too_large()) return;
  ops.run([&] {
    if (shared) {
      hc_expand_shared_q8(params, weight, input, routed, block, e.x, e.post, e.comb, e.out);
    } else {
      hc_expand_q8(params, weight, input, block, e.x, e.post, e.comb, e.out);
    }
  });
}

}  // namespace

void fuzz_hc_call(FuzzedDataProvider& data) {
  const HcParams params = pick_params(data);
  const Shapes s(params, pick<std::int64_t>(data, 1, 3, {0, -1}));
  const int call = data.ConsumeIntegralInRange(0, 9);
  if (call == 7 || call == 8) return fuzz_pre_call(data, params, s, call == 8);
  if (call == 9) return fuzz_expand_q8_call(data, params, s);
  Operands ops(data);
  const auto in = [&](std::initializer_list<std::int64_t> shape) {
    return ops.add(Role::input, DType::f32, shape);
  };
  const auto out = [&](std::initializer_list<std::int64_t> shape) {
    return ops.add(Role::output, DType::f32, shape);
  };
  switch (call) {
    case 0: {
      const TensorView mix = in({s.rows, s.m}), scale = in({3}), base = in({s.m});
      const TensorView split = out({s.rows, s.m});
      if (!ops.too_large()) ops.run([&] { hc_split(params, mix, scale, base, split); });
      return;
    }
    case 1: {
      const TensorView x = in({s.rows, s.n, s.e}), pre = in({s.rows, s.n});
      const TensorView collapsed = out({s.rows, s.e});
      if (!ops.too_large()) ops.run([&] { hc_collapse(params, x, pre, collapsed); });
      return;
    }
    case 2: {
      const TensorView u = in({s.rows, s.e}), weight = in({s.e});
      const TensorView normed = out({s.rows, s.e});
      if (!ops.too_large()) ops.run([&] { hc_rms_norm(params, u, weight, normed); });
      return;
    }
    case 3:
    case 4: {
      const TensorView mix = in({s.rows, s.m}), scale = in({3}), base = in({s.m});
      const TensorView x = in({s.rows, s.n, s.e}), norm_weight = in({s.e});
      const TensorView split = out({s.rows, s.m}), collapsed = out({s.rows, s.e});
      const TensorView normed = out({s.rows, s.e});
      if (ops.too_large()) return;
      ops.run([&] {
        if (call == 3) {
          hc_split_collapse(params, mix, scale, base, x, split, collapsed);
        } else {
          hc_split_collapse_norm(params, mix, scale, base, x, norm_weight, split, collapsed,
                                 normed);
        }
      });
      return;
    }
    case 5: {
      const TensorView block = in({s.rows, s.e});
      const TensorView add = ops.add(Role::input, DType::f32, {s.rows, s.e}, true);
      const ExpandOperands e(ops, s);
      if (ops.too_large()) return;
      ops.run([&] { hc_expand(params, block, add, e.x, e.post, e.comb, e.out); });
      return;
    }
    default: {
      const float post_scale = pick_float(data, {1.0f, 2.0f});
      const TensorView logits = in({s.rows, s.n}), scale = in({1}), base = in({s.n});
      const TensorView weights = out({s.rows, s.n});
      if (ops.too_large()) return;
      ops.run([&] { hc_head_weights(params, post_scale, logits, scale, base, weights); });
    }
  }
}

}  // namespace turbodecode::fuzz
