// Which kernel runs norm-mix / HC-pre (HcPreKernel): the choice plan_hc_pre's residency leads to
// for representative T, checked on the CPU with the residency of an H200 (132 SMs) and with
// devices that run fewer clusters. The GPU test PlanPicksTheKernelForEachBatchSize checks the
// residency a real device reports.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "hc/pre_kernel.h"
#include "hc/pre_workspace.h"
#include "turbodecode/error.h"
#include "turbodecode/hc.h"

namespace turbodecode {
namespace {

// What an H200 runs at once: 7 small-T clusters of either shape (one block per SM, 16 blocks
// each), 30 and 60 row-cluster tiles.
constexpr HcPreResidency kH200 = {7, 7, 30, 60};

// A CUDA plan as plan_hc_pre makes it, with a given residency (plan_hc_pre itself needs a GPU).
HcPrePlan cuda_plan(const HcParams& params, std::int64_t max_rows, HcPreResidency residency) {
  HcPrePlan plan;
  plan.params = params;
  plan.device = Device::cuda;
  plan.max_rows = max_rows;
  const std::int64_t chunks = hc::pre_chunks(params.n_hc * params.embd);
  plan.chunks = static_cast<int>(chunks);
  plan.workspace_bytes = hc::pre_workspace_bytes(max_rows, chunks, hc_mix_width(params.n_hc));
  plan.norm_mix_residency = residency;
  plan.pre_residency = residency;
  return plan;
}

std::string name(HcPreKernel kernel) {
  switch (kernel) {
    case HcPreKernel::cpu:
      return "cpu";
    case HcPreKernel::grid:
      return "grid";
    case HcPreKernel::cluster_small_t:
      return "cluster_small_t";
    case HcPreKernel::row_clusters:
      return "row_clusters";
  }
  return "?";
}

void expect_kernel(const HcPrePlan& plan, std::initializer_list<std::int64_t> rows,
                   HcPreKernel expected) {
  for (std::int64_t t : rows) {
    EXPECT_EQ(name(hc_pre_kernel(plan, t)), name(expected)) << "T " << t;
    EXPECT_EQ(name(hc_norm_mix_kernel(plan, t)), name(expected)) << "norm-mix, T " << t;
  }
}

TEST(HcPreKernel, OnAnH200SmallTClustersThenRowClusters) {
  const HcPrePlan plan = cuda_plan(HcParams{}, 8192, kH200);
  expect_kernel(plan, {1, 7, 8, 33, 56}, HcPreKernel::cluster_small_t);
  expect_kernel(plan, {57, 64, 512, 513, 600, 8192}, HcPreKernel::row_clusters);
}

TEST(HcPreKernel, SmallTClustersTakeOneRowEachWhileTheyAllRunAtOnce) {
  for (std::int64_t t : {1, 7}) EXPECT_EQ(hc::small_t_cluster_rows(kH200, t), 1) << "T " << t;
  for (std::int64_t t : {8, 56}) {
    EXPECT_EQ(hc::small_t_cluster_rows(kH200, t), hc::kPreMaxGroupRows) << "T " << t;
  }
}

TEST(HcPreKernel, ProblemsTheClustersDoNotTakeRunOnTheGrid) {
  for (const auto& [n_hc, embd] :
       {std::pair<int, std::int64_t>{3, 4096}, {8, 4096}, {4, 4100}, {4, 5128}}) {
    SCOPED_TRACE("n_hc " + std::to_string(n_hc) + ", E " + std::to_string(embd));
    HcParams params;
    params.n_hc = n_hc;
    params.embd = embd;
    expect_kernel(cuda_plan(params, 600, kH200), {1, 33, 600}, HcPreKernel::grid);
  }
  HcParams widest;
  widest.embd = 5120;
  expect_kernel(cuda_plan(widest, 600, kH200), {1}, HcPreKernel::cluster_small_t);
  expect_kernel(cuda_plan(widest, 600, kH200), {600}, HcPreKernel::row_clusters);
}

TEST(HcPreKernel, ViewsWithoutSixteenByteLoadsRunOnTheGrid) {
  for (std::int64_t t : {1, 33, 600}) {
    EXPECT_EQ(name(hc::choose_pre_kernel(kH200, HcParams{}, t, false)), name(HcPreKernel::grid));
  }
  alignas(16) static float x[64];
  alignas(16) static std::uint16_t w[64];
  hc::NormMixArgs args;
  args.x = {x, 32, 8};
  args.weight = w;
  args.weight_stride = 16;
  EXPECT_TRUE(hc::allows_vector_loads(args));
  using Mutation = void (*)(hc::NormMixArgs&);
  for (const Mutation mutate :
       std::initializer_list<Mutation>{[](hc::NormMixArgs& a) { a.x.data += 1; },
                                       [](hc::NormMixArgs& a) { a.x.row_stride = 34; },
                                       [](hc::NormMixArgs& a) { a.x.stream_stride = 10; },
                                       [](hc::NormMixArgs& a) { a.weight += 4; },
                                       [](hc::NormMixArgs& a) { a.weight_stride = 12; }}) {
    hc::NormMixArgs bad = args;
    mutate(bad);
    EXPECT_FALSE(hc::allows_vector_loads(bad));
  }
}

// A device that runs fewer clusters moves the crossovers; one that runs none of a shape never
// gets that kernel.
TEST(HcPreKernel, FollowsTheDevicesResidency) {
  expect_kernel(cuda_plan(HcParams{}, 600, {2, 3, 30, 60}), {1, 24}, HcPreKernel::cluster_small_t);
  expect_kernel(cuda_plan(HcParams{}, 600, {2, 3, 30, 60}), {25}, HcPreKernel::row_clusters);
  EXPECT_EQ(hc::small_t_cluster_rows({2, 3, 30, 60}, 3), hc::kPreMaxGroupRows);
  expect_kernel(cuda_plan(HcParams{}, 600, {9, 1, 30, 60}), {9}, HcPreKernel::cluster_small_t);
  expect_kernel(cuda_plan(HcParams{}, 600, {9, 1, 30, 60}), {10}, HcPreKernel::row_clusters);
  expect_kernel(cuda_plan(HcParams{}, 600, {0, 0, 30, 60}), {1}, HcPreKernel::row_clusters);
  expect_kernel(cuda_plan(HcParams{}, 600, {7, 7, 30, 0}), {512}, HcPreKernel::row_clusters);
  expect_kernel(cuda_plan(HcParams{}, 600, {7, 7, 30, 0}), {513}, HcPreKernel::grid);
  expect_kernel(cuda_plan(HcParams{}, 600, {7, 7, 0, 60}), {100}, HcPreKernel::grid);
  expect_kernel(cuda_plan(HcParams{}, 600, {}), {1, 600}, HcPreKernel::grid);
}

TEST(HcPreKernel, NormMixAndHcPreFollowTheirOwnResidency) {
  HcPrePlan plan = cuda_plan(HcParams{}, 600, kH200);
  plan.norm_mix_residency = {0, 0, 0, 0};
  EXPECT_EQ(name(hc_pre_kernel(plan, 1)), name(HcPreKernel::cluster_small_t));
  EXPECT_EQ(name(hc_norm_mix_kernel(plan, 1)), name(HcPreKernel::grid));
}

TEST(HcPreKernel, CpuPlansRunOnTheCpu) {
  expect_kernel(plan_hc_pre(HcParams{}, 8, Device::cpu), {1, 8}, HcPreKernel::cpu);
}

TEST(HcPreKernel, RejectsRowsOutsideThePlan) {
  const HcPrePlan plan = cuda_plan(HcParams{}, 8, kH200);
  for (std::int64_t t : {0, 9}) {
    try {
      hc_pre_kernel(plan, t);
      ADD_FAILURE() << "accepted T " << t;
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), "rows") << e.what();
    }
  }
}

}  // namespace
}  // namespace turbodecode
