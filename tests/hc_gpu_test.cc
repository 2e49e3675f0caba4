// CUDA backend of the mHC operators and the Q8_0 matvec: every operator against the oracle and
// the CPU backend, fused == unfused bitwise, HC-pre back to back and replayed from a CUDA
// graph, extreme inputs. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "hc_checks.h"
#include "turbodecode/error.h"

#ifdef TURBODECODE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace turbodecode {
namespace {

using testing::HcProblem;
using testing::HcShape;
using testing::make_hc_problem;

constexpr HcShape kShapes[] = {{4, 4096, 1, false}, {4, 4096, 7, true}, {4, 5120, 2, false},
                               {1, 64, 3, true},    {3, 33, 4, false},  {8, 128, 3, true},
                               {16, 64, 2, true},   {4, 100, 9, true}};

class HcGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// Runs check(problem, device) on both backends and compares CUDA with CPU.
template <class Check>
void on_both_backends(Check check) {
  for (const HcShape& s : kShapes) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", n_hc " + std::to_string(s.n_hc) + ", E " +
                 std::to_string(s.embd) + ", T " + std::to_string(s.rows));
    HcParams params;
    params.n_hc = s.n_hc;
    params.embd = s.embd;
    const HcProblem p = make_hc_problem(params, s.rows, seed, s.strided);
    const std::vector<float> gpu = check(p, Device::cuda);
    const std::vector<float> cpu = check(p, Device::cpu);
    EXPECT_LE(testing::relative_l2(
                  gpu, testing::widen(cpu.data(), static_cast<std::int64_t>(cpu.size()))),
              testing::kHcTolerance)
        << "CUDA vs CPU";
  }
}

TEST_F(HcGpu, Split) {
  on_both_backends([](const HcProblem& p, Device d) { return testing::check_split(p, d); });
}

TEST_F(HcGpu, Collapse) {
  on_both_backends([](const HcProblem& p, Device d) { return testing::check_collapse(p, d); });
}

TEST_F(HcGpu, RmsNorm) {
  on_both_backends([](const HcProblem& p, Device d) { return testing::check_rms_norm(p, d); });
}

TEST_F(HcGpu, SplitCollapseEqualsItsParts) {
  on_both_backends([](const HcProblem& p, Device d) {
    return testing::check_split_collapse(p, d, false).collapsed;
  });
}

TEST_F(HcGpu, SplitCollapseNormEqualsItsParts) {
  on_both_backends([](const HcProblem& p, Device d) {
    return testing::check_split_collapse(p, d, true).normed;
  });
}

TEST_F(HcGpu, Expand) {
  on_both_backends([](const HcProblem& p, Device d) { return testing::check_expand(p, d, false); });
  on_both_backends([](const HcProblem& p, Device d) { return testing::check_expand(p, d, true); });
}

TEST_F(HcGpu, HeadWeights) {
  on_both_backends([](const HcProblem& p, Device d) { return testing::check_head_weights(p, d); });
}

TEST_F(HcGpu, NormMix) {
  on_both_backends([](const HcProblem& p, Device d) { return testing::check_norm_mix(p, d); });
}

TEST_F(HcGpu, PreEqualsItsPartsAndRepeatsBackToBack) {
  on_both_backends([](const HcProblem& p, Device d) { return testing::check_pre(p, d).normed; });
}

TEST_F(HcGpu, PreAtPrefillRowsMatchesOracle) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  testing::check_pre(make_hc_problem(HcParams{}, 512, seed, true), Device::cuda);
}

TEST_F(HcGpu, PreRowsDoNotDependOnTheBatch) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const HcProblem batch = make_hc_problem(HcParams{}, 6, seed, false);
  HcProblem single = batch;
  const std::int64_t row = 5;
  single.rows = 1;
  single.x.assign(batch.x.begin() + row * batch.x_row_stride,
                  batch.x.begin() + (row + 1) * batch.x_row_stride);
  single.mix.resize(static_cast<std::size_t>(single.mix_width()));
  const auto run = [](const HcProblem& p) {
    testing::HcDeviceInputs in(p, Device::cuda);
    const HcPrePlan plan = plan_hc_pre(p.params, p.rows, Device::cuda);
    Buffer workspace = testing::zeroed_workspace(plan);
    return testing::run_pre(in, plan, workspace, 1);
  };
  const auto all = run(batch);
  const auto one = run(single);
  const std::int64_t e = batch.params.embd;
  EXPECT_TRUE(testing::bitwise_equal(testing::float_row(all.normed, row, e), one.normed));
  EXPECT_TRUE(
      testing::bitwise_equal(testing::float_row(all.split, row, batch.mix_width()), one.split));
}

TEST_F(HcGpu, PreReplaysFromACudaGraph) {
#ifdef TURBODECODE_WITH_CUDA
  for (std::int64_t rows : {1, 32, 512}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", T " + std::to_string(rows));
    const HcProblem p = make_hc_problem(HcParams{}, rows, seed, false);
    testing::HcDeviceInputs in(p, Device::cuda);
    const HcPrePlan plan = plan_hc_pre(p.params, rows, Device::cuda);
    Buffer workspace = testing::zeroed_workspace(plan);
    const auto eager = testing::run_pre(in, plan, workspace, 1);

    const std::int64_t e = p.params.embd;
    const int m = p.mix_width();
    Buffer mix = testing::poisoned(Device::cuda, rows * m);
    Buffer split = testing::poisoned(Device::cuda, rows * m);
    Buffer collapsed = testing::poisoned(Device::cuda, rows * e);
    Buffer normed = testing::poisoned(Device::cuda, rows * e);
    // The poisoning memsets ran on the legacy stream, which `stream` does not wait for.
    synchronize();
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    for (int i = 0; i < 3; ++i) {
      hc_pre(plan, in.x_view(), in.mix_weight_view(), in.scale_view(), in.base_view(),
             in.norm_weight_view(), mix.view(DType::f32, {rows, m}),
             split.view(DType::f32, {rows, m}), collapsed.view(DType::f32, {rows, e}),
             normed.view(DType::f32, {rows, e}), workspace.view(DType::u8, {workspace.bytes()}),
             Stream{stream});
    }
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 5; ++replay) {
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const testing::PreOutputs replayed{testing::to_host<float>(mix), testing::to_host<float>(split),
                                       testing::to_host<float>(collapsed),
                                       testing::to_host<float>(normed)};
    EXPECT_TRUE(replayed == eager);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
#endif
}

TEST_F(HcGpu, Q8Matvec) {
  for (const auto& [rows, cols, tokens, pad] :
       {std::array<std::int64_t, 4>{4096, 2048, 1, 0}, {37, 96, 3, 2}, {4096, 4096, 2, 6}}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", rows " + std::to_string(rows));
    const auto gpu = testing::check_q8_matvec(Device::cuda, rows, cols, tokens, pad, seed);
    const auto cpu = testing::check_q8_matvec(Device::cpu, rows, cols, tokens, pad, seed);
    EXPECT_LE(testing::relative_l2(
                  gpu, testing::widen(cpu.data(), static_cast<std::int64_t>(cpu.size()))),
              testing::kHcTolerance);
  }
}

TEST_F(HcGpu, ExpandQ8EqualsMatvecThenExpand) {
  for (bool shared : {false, true}) {
    for (const auto& [n_hc, rows] : {std::pair{4, 1}, std::pair{4, 3}, std::pair{3, 2}}) {
      const std::uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed) + (shared ? " shared" : " attention"));
      HcParams params;
      params.n_hc = n_hc;
      params.embd = 4096;
      testing::check_expand_q8(make_hc_problem(params, rows, seed, true), Device::cuda, 2048,
                               shared, seed + 100);
    }
  }
}

TEST_F(HcGpu, HugeLogitsGiveFiniteSplits) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  HcProblem p = make_hc_problem(HcParams{}, 4, seed, false);
  for (std::size_t i = 0; i < p.mix.size(); ++i) p.mix[i] = (i % 3 == 0 ? -1e30f : 1e30f);
  p.scale = {1.0f, 1.0f, 1.0f};
  for (float v : testing::check_split(p, Device::cuda)) EXPECT_TRUE(std::isfinite(v));
  for (float v : testing::check_split_collapse(p, Device::cuda, true).split) {
    EXPECT_TRUE(std::isfinite(v));
  }
}

TEST_F(HcGpu, NanInputsPropagateWithoutHanging) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  HcProblem p = make_hc_problem(HcParams{}, 2, seed, false);
  p.x[7] = std::numeric_limits<float>::quiet_NaN();
  p.mix_weight[3] = 0x7e00;  // f16 NaN
  testing::HcDeviceInputs in(p, Device::cuda);
  const HcPrePlan plan = plan_hc_pre(p.params, p.rows, Device::cuda);
  Buffer workspace = testing::zeroed_workspace(plan);
  const auto out = testing::run_pre(in, plan, workspace, 2);
  EXPECT_TRUE(std::isnan(out.normed[0]));
  EXPECT_TRUE(std::isnan(out.mix[p.mix_width()]));  // row 1 meets the NaN weight too
}

TEST_F(HcGpu, RejectsASmallWorkspace) {
  const HcProblem p = make_hc_problem(HcParams{}, 2, testing::fresh_seed(), false);
  testing::HcDeviceInputs in(p, Device::cuda);
  const HcPrePlan plan = plan_hc_pre(p.params, p.rows, Device::cuda);
  Buffer workspace(Device::cuda, plan.workspace_bytes - 4);
  Buffer mix = testing::poisoned(Device::cuda, 2 * p.mix_width());
  try {
    hc_norm_mix(plan, in.x_view(), in.mix_weight_view(), mix.view(DType::f32, {2, p.mix_width()}),
                workspace.view(DType::u8, {workspace.bytes()}));
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "workspace");
  }
  for (std::uint8_t b : testing::to_host<std::uint8_t>(mix)) ASSERT_EQ(b, 0xFF);
}

// Every HC kernel once on small problems: the subset run_gpu.sh gives to racecheck and
// synccheck (named *Sanitizer*).
TEST(HcGpuSanitizer, EveryKernelOnSmallProblems) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const auto& [n_hc, embd, rows] : {std::tuple{4, std::int64_t{256}, std::int64_t{5}},
                                         std::tuple{3, std::int64_t{33}, std::int64_t{2}}}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", n_hc " + std::to_string(n_hc));
    HcParams params;
    params.n_hc = n_hc;
    params.embd = embd;
    const HcProblem p = make_hc_problem(params, rows, seed, true);
    testing::check_split(p, Device::cuda);
    testing::check_collapse(p, Device::cuda);
    testing::check_rms_norm(p, Device::cuda);
    testing::check_split_collapse(p, Device::cuda, true);
    testing::check_expand(p, Device::cuda, true);
    testing::check_head_weights(p, Device::cuda);
    testing::check_norm_mix(p, Device::cuda);
    testing::check_pre(p, Device::cuda);
    testing::check_expand_q8(p, Device::cuda, 64, false, seed + 1);
    testing::check_expand_q8(p, Device::cuda, 64, true, seed + 2);
  }
  testing::check_q8_matvec(Device::cuda, 40, 96, 3, 2, testing::fresh_seed());
}

}  // namespace
}  // namespace turbodecode
