// Bad arguments to the HC and Q8_0 operators (SPEC §7): each is rejected with an
// InvalidArgument naming the argument, and nothing is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "hc_checks.h"
#include "turbodecode/error.h"

namespace turbodecode {
namespace {

using testing::HcDeviceInputs;
using testing::HcProblem;

class HcValidation : public ::testing::Test {
 protected:
  HcValidation()
      : problem_(testing::make_hc_problem(HcParams{}, 2, testing::fresh_seed(), false, 1.0f)),
        in_(problem_, Device::cpu),
        out_(testing::poisoned(Device::cpu, 2 * problem_.width())),
        split_(testing::poisoned(Device::cpu, 2 * problem_.mix_width())) {}

  // Expects `call` to throw InvalidArgument naming `argument`, leaving the outputs poisoned.
  void expect_rejected(const std::function<void()>& call, const std::string& argument) {
    SCOPED_TRACE("argument " + argument);
    try {
      call();
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
    for (std::uint8_t b : testing::to_host<std::uint8_t>(out_)) ASSERT_EQ(b, 0xFF);
    for (std::uint8_t b : testing::to_host<std::uint8_t>(split_)) ASSERT_EQ(b, 0xFF);
  }

  TensorView split_view() const { return split_.view(DType::f32, {2, problem_.mix_width()}); }
  TensorView rows_out() const { return out_.view(DType::f32, {2, problem_.params.embd}); }
  TensorView state_out() const { return out_.view(DType::f32, {2, 4, problem_.params.embd}); }

  HcProblem problem_;
  HcDeviceInputs in_;
  Buffer out_;
  Buffer split_;
};

TEST_F(HcValidation, RejectsBadParameters) {
  for (int n : {0, 17}) {
    HcParams params;
    params.n_hc = n;
    expect_rejected(
        [&] { hc_split(params, in_.mix_view(), in_.scale_view(), in_.base_view(), split_view()); },
        "n_hc");
  }
  HcParams params;
  params.sinkhorn_iters = 0;
  expect_rejected(
      [&] { hc_split(params, in_.mix_view(), in_.scale_view(), in_.base_view(), split_view()); },
      "sinkhorn_iters");
  params = HcParams{};
  params.norm_eps = 0.0f;
  expect_rejected(
      [&] { hc_rms_norm(params, in_.block_view(), in_.norm_weight_view(), rows_out()); },
      "norm_eps");
}

TEST_F(HcValidation, RejectsMismatchedShapesAndTypes) {
  const HcParams& params = problem_.params;
  expect_rejected(
      [&] {
        hc_split(params, in_.mix_view(), in_.scale_view(), in_.base.view(DType::f32, {23}),
                 split_view());
      },
      "base");
  expect_rejected(
      [&] {
        hc_split(params, in_.mix_view(), in_.scale_view(), in_.base_view(),
                 split_.view(DType::f32, {1, 24}));
      },
      "split");
  expect_rejected(
      [&] {
        hc_collapse(params, in_.x_view(), in_.mix.view(DType::f32, {2, 3}), rows_out());
      },
      "pre");
  expect_rejected(
      [&] {
        hc_rms_norm(params, in_.block_view(), in_.norm_weight.view(DType::i32, {4096}), rows_out());
      },
      "weight");
  expect_rejected(
      [&] {
        hc_expand(params, in_.block_view(), {}, in_.x_view(), testing::post_view(in_.mix, 2, 4),
                  in_.mix.view(DType::f32, {2, 4, 3}), state_out());
      },
      "comb");
  expect_rejected(
      [&] { hc_collapse(params, in_.x_view(), testing::pre_view(in_.mix, 2, 4), TensorView{}); },
      "out");
  TensorView inner_strided = in_.block_view();
  inner_strided.shape[1] = 2048;
  inner_strided.strides[1] = 2;
  HcParams narrow = params;
  narrow.embd = 2048;
  expect_rejected(
      [&] {
        hc_rms_norm(narrow, inner_strided, in_.norm_weight.view(DType::f32, {2048}),
                    out_.view(DType::f32, {2, 2048}));
      },
      "u");
}

TEST_F(HcValidation, RejectsOverlappingOutputs) {
  const HcParams& params = problem_.params;
  expect_rejected([&] { hc_rms_norm(params, rows_out(), in_.norm_weight_view(), rows_out()); },
                  "out");
  expect_rejected(
      [&] { hc_split(params, in_.mix_view(), in_.scale_view(), in_.base_view(), in_.mix_view()); },
      "split");
}

TEST_F(HcValidation, RejectsTooManyRowsForThePlan) {
  const HcPrePlan plan = plan_hc_pre(problem_.params, 1, Device::cpu);
  expect_rejected([&] { hc_norm_mix(plan, in_.x_view(), in_.mix_weight_view(), split_view(), {}); },
                  "x");
  HcPrePlan forged = plan;
  forged.chunks = 7;
  expect_rejected(
      [&] { hc_norm_mix(forged, in_.x_view(), in_.mix_weight_view(), split_view(), {}); }, "plan");
  forged = plan;
  forged.pre_residency.single_row_clusters = 7;  // a CPU plan runs no clusters
  expect_rejected(
      [&] { hc_norm_mix(forged, in_.x_view(), in_.mix_weight_view(), split_view(), {}); }, "plan");
}

// A plan that needs no workspace ignores the view passed for it, whatever its shape: the
// overlap checks must not compute its extent (under UBSan, a signed overflow).
TEST_F(HcValidation, IgnoresTheWorkspaceOfAPlanThatNeedsNone) {
  const HcPrePlan plan = plan_hc_pre(problem_.params, 2, Device::cpu);
  ASSERT_EQ(plan.workspace_bytes, 0);
  std::uint8_t byte = 0;
  TensorView hostile;
  hostile.data = &byte;
  hostile.device = Device::cpu;
  hostile.dtype = DType::f32;
  hostile.rank = 2;
  hostile.shape[0] = INT64_MIN + 2;
  hostile.shape[1] = 3;
  hostile.strides[0] = INT64_MAX;
  hostile.strides[1] = 1;
  hc_norm_mix(plan, in_.x_view(), in_.mix_weight_view(), split_view(), hostile);
  for (float v : testing::to_host<float>(split_)) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(HcValidation, RejectsBadQ8Operands) {
  const auto packed = testing::random_q8_weight(4096, 64, testing::fresh_seed());
  const auto input = testing::gaussian(2 * 64, 1);
  Buffer weight = testing::to_device(Device::cpu, packed);
  Buffer act = testing::to_device(Device::cpu, input);
  expect_rejected(
      [&] {
        q8_matvec(weight.view(DType::u8, {4096, 68}), act.view(DType::f32, {2, 48}), rows_out());
      },
      "input");
  expect_rejected(
      [&] {
        q8_matvec(weight.view(DType::u8, {4095, 68}, 1), act.view(DType::f32, {2, 64}), rows_out());
      },
      "weight");
  expect_rejected(
      [&] {
        q8_matvec(weight.view(DType::u8, {4096, 68}), act.view(DType::f32, {2, 64}),
                  out_.view(DType::f32, {2, 4095}));
      },
      "out");
  expect_rejected(
      [&] {
        hc_expand_q8(problem_.params, weight.view(DType::u8, {2048, 68}),
                     act.view(DType::f32, {2, 64}), rows_out(), in_.x_view(),
                     testing::post_view(in_.mix, 2, 4), testing::comb_view(in_.mix, 2, 4),
                     state_out());
      },
      "weight");
}

}  // namespace
}  // namespace turbodecode
