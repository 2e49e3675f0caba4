// CPU backend of the mHC operators (SPEC §3) against the double-precision oracle, fused versus
// unfused compositions, extreme inputs and argument validation (SPEC §7).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "hc_checks.h"
#include "turbodecode/error.h"

namespace turbodecode {
namespace {

using testing::HcProblem;
using testing::HcShape;
using testing::make_hc_problem;

// n = 4 fast path and general n from 1 to 16, odd widths, strided states, T > 1.
constexpr HcShape kShapes[] = {{4, 256, 1, false}, {4, 256, 5, true},  {1, 64, 3, true},
                               {2, 100, 2, true},  {3, 33, 4, false},  {8, 128, 3, true},
                               {16, 64, 2, true},  {4, 4096, 1, false}};

// Every shape on every SIMD target the CPU backend has for this CPU.
template <class Check>
void for_each_shape(Check check) {
  testing::for_each_simd_target([&] { testing::for_each_hc_shape(kShapes, check); });
}

TEST(HcCpu, SplitMatchesOracleAndIsDoublyStochastic) {
  for_each_shape([](const HcProblem& p) { testing::check_split(p, Device::cpu); });
}

TEST(HcCpu, SplitWithOneIterationEndsWithColumnNormalisation) {
  HcParams params;
  params.sinkhorn_iters = 1;
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const HcProblem p = make_hc_problem(params, 3, seed, false);
  testing::HcDeviceInputs in(p, Device::cpu);
  Buffer split = testing::poisoned(Device::cpu, 3 * p.mix_width());
  hc_split(params, in.mix_view(), in.scale_view(), in.base_view(),
           split.view(DType::f32, {3, p.mix_width()}));
  const auto got = testing::to_host<float>(split);
  for (std::int64_t t = 0; t < 3; ++t) {
    EXPECT_LE(testing::relative_l2(testing::float_row(got, t, p.mix_width()),
                                   testing::oracle_split(p, t)),
              testing::kHcTolerance);
  }
}

TEST(HcCpu, CollapseMatchesOracle) {
  for_each_shape([](const HcProblem& p) { testing::check_collapse(p, Device::cpu); });
}

TEST(HcCpu, RmsNormMatchesOracle) {
  for_each_shape([](const HcProblem& p) { testing::check_rms_norm(p, Device::cpu); });
}

TEST(HcCpu, SplitCollapseEqualsSplitThenCollapse) {
  for_each_shape([](const HcProblem& p) { testing::check_split_collapse(p, Device::cpu, false); });
}

TEST(HcCpu, SplitCollapseNormEqualsItsParts) {
  for_each_shape([](const HcProblem& p) { testing::check_split_collapse(p, Device::cpu, true); });
}

TEST(HcCpu, ExpandMatchesOracle) {
  for_each_shape([](const HcProblem& p) {
    testing::check_expand(p, Device::cpu, false);
    testing::check_expand(p, Device::cpu, true);
  });
}

TEST(HcCpu, HeadWeightsMatchOracle) {
  for_each_shape([](const HcProblem& p) { testing::check_head_weights(p, Device::cpu); });
}

TEST(HcCpu, NormMixMatchesOracle) {
  for_each_shape([](const HcProblem& p) { testing::check_norm_mix(p, Device::cpu); });
}

TEST(HcCpu, NormMixOnDeepSeekV41Width) {
  HcParams params;
  params.embd = 5120;
  testing::for_each_simd_target([&] {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(seed);
    testing::check_norm_mix(make_hc_problem(params, 1, seed, false), Device::cpu);
  });
}

TEST(HcCpu, PreEqualsItsPartsAndOracle) {
  for_each_shape([](const HcProblem& p) { testing::check_pre(p, Device::cpu); });
}

TEST(HcCpu, ExpandQ8EqualsMatvecThenExpand) {
  testing::for_each_simd_target([] {
    for (bool shared : {false, true}) {
      for (std::int64_t rows : {1, 3}) {
        const std::uint64_t seed = testing::fresh_seed();
        SCOPED_TRACE("seed " + std::to_string(seed) + (shared ? " shared" : " attention"));
        HcParams params;
        params.embd = 256;
        testing::check_expand_q8(make_hc_problem(params, rows, seed, true), Device::cpu, 128,
                                 shared, seed + 100);
      }
    }
  });
}

TEST(HcCpu, HugeLogitsGiveFiniteSplits) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  HcProblem p = make_hc_problem(HcParams{}, 4, seed, false);
  for (std::size_t i = 0; i < p.mix.size(); ++i) p.mix[i] = (i % 3 == 0 ? -1e30f : 1e30f);
  p.mix[5] = 3e29f;
  p.scale = {1.0f, 1.0f, 1.0f};
  const auto got = testing::check_split(p, Device::cpu);
  for (float v : got) EXPECT_TRUE(std::isfinite(v));
}

TEST(HcCpu, NanInputsPropagateWithoutCrashing) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  HcProblem p = make_hc_problem(HcParams{}, 2, seed, false);
  p.mix[3] = std::numeric_limits<float>::quiet_NaN();
  p.x[7] = std::numeric_limits<float>::quiet_NaN();
  testing::HcDeviceInputs in(p, Device::cpu);
  const HcPrePlan plan = plan_hc_pre(p.params, p.rows, Device::cpu);
  Buffer workspace = testing::zeroed_workspace(plan);
  const auto out = testing::run_pre(in, plan, workspace, 1);
  // Row 0 holds the NaN in x, so its whole chain is NaN; row 1 is untouched by it.
  EXPECT_TRUE(std::isnan(out.normed[0]));
  for (std::int64_t d = 0; d < p.params.embd; ++d) {
    ASSERT_TRUE(std::isfinite(out.normed[p.params.embd + d]));
  }
}

}  // namespace
}  // namespace turbodecode
