// CUDA backend of the mHC operators and the Q8_0 matvec: every operator against the oracle and
// the CPU backend, fused == unfused bitwise, HC-pre back to back and replayed from a CUDA
// graph, extreme inputs. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

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
  testing::for_each_hc_shape(kShapes, [&](const HcProblem& p) {
    const std::vector<float> gpu = check(p, Device::cuda);
    const std::vector<float> cpu = check(p, Device::cpu);
    EXPECT_LE(testing::relative_l2(
                  gpu, testing::widen(cpu.data(), static_cast<std::int64_t>(cpu.size()))),
              testing::kHcTolerance)
        << "CUDA vs CPU";
  });
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
  const auto all = testing::run_pre_on_gpu(batch);
  const auto one = testing::run_pre_on_gpu(single);
  const std::int64_t e = batch.params.embd;
  EXPECT_TRUE(testing::bitwise_equal(testing::float_row(all.normed, row, e), one.normed));
  EXPECT_TRUE(
      testing::bitwise_equal(testing::float_row(all.split, row, batch.mix_width()), one.split));
}

// Batch sizes and widths at the edges of HC-pre's launch schedules. n_hc = 4 with E ≤ 5120, E % 8
// = 0 and aligned views runs on clusters. While all of them run at once (H200: T ≤ 56) that is
// cluster_small_t.cu: one row each (T = 1 … 4 here), else groups of 8 rows, the last one partial
// (T = 9 … 33). More rows take the row clusters of row_clusters.cu, tiles of 8 rows, the
// last one partial: 8 blocks per tile up to T = 512 (T = 57 … 129), 2 beyond (T = 523, 530: the
// last tile's rows all on the first block). There: a last chunk of one span (E = 4104: 65
// chunks, one block with 9, or 33 of 2), a partial half chunk (E = 40: blocks without chunks), a
// single chunk (E = 64),
// E = 5120 (80 chunks: three per lane of the combine for some lanes; on the small-T clusters
// five collapse slabs, at T = 11 three per block; on the row clusters 10 chunks per block). The
// other shapes take the grid kernel: rows that are not 16-byte aligned (E = 4100: scalar
// loads), n ≠ 4 (ragged groups of 4 and 8 rows, bands of groups, widths below one half chunk,
// M > 32: several rounds of outputs, with and without bands) and E = 5128 (81 chunks).
TEST_F(HcGpu, PreAtScheduleEdgesMatchesOracleAndCpu) {
  constexpr HcShape kEdges[] = {
      {4, 4096, 33, true}, {4, 4096, 65, false}, {4, 4104, 129, true}, {4, 4100, 9, false},
      {3, 40, 70, true},   {8, 128, 33, false},  {8, 128, 200, true},  {16, 64, 20, true},
      {2, 8, 300, true},   {4, 4096, 3, true},   {4, 4096, 4, false},  {4, 5120, 2, true},
      {4, 5128, 1, false}, {4, 64, 1, false},    {4, 4104, 1, false},  {4, 40, 2, false},
      {4, 4096, 16, true}, {4, 5120, 11, false}, {4, 40, 9, true},     {4, 5120, 70, true},
      {4, 40, 60, false},  {4, 4104, 57, false}, {4, 64, 64, true},    {4, 4104, 530, true},
      {4, 40, 523, false}};
  testing::for_each_hc_shape(kEdges, [](const HcProblem& p) {
    const auto gpu = testing::check_pre(p, Device::cuda);
    const auto cpu = testing::check_pre(p, Device::cpu);
    EXPECT_LE(testing::relative_l2(
                  gpu.normed,
                  testing::widen(cpu.normed.data(), static_cast<std::int64_t>(cpu.normed.size()))),
              testing::kHcTolerance);
  });
}

// plan_hc_pre finds the cluster kernels resident on this device, and the T of the tests here
// run the kernels their comments name (as on an H200: the small-T clusters up to T = 56, one
// row per cluster up to 7; the row clusters beyond, 8 blocks per tile up to T = 512, 2 above;
// the grid kernel for problems the clusters do not take).
TEST_F(HcGpu, PlanPicksTheKernelForEachBatchSize) {
  const HcPrePlan plan = plan_hc_pre(HcParams{}, 8192, Device::cuda);
  for (const HcPreResidency& r : {plan.pre_residency, plan.norm_mix_residency}) {
    EXPECT_EQ(r.single_row_clusters, 7) << "the T below are those of an H200";
    EXPECT_EQ(r.row_group_clusters, 7);
    EXPECT_GT(r.tile_clusters_8, 0);
    EXPECT_GT(r.tile_clusters_2, 0);
  }
  for (std::int64_t t : {1, 3, 4, 5, 7, 8, 9, 13, 16, 20, 33, 40, 56}) {
    EXPECT_EQ(hc_pre_kernel(plan, t), HcPreKernel::cluster_small_t) << "T " << t;
    EXPECT_EQ(hc_norm_mix_kernel(plan, t), HcPreKernel::cluster_small_t) << "T " << t;
  }
  for (std::int64_t t : {57, 60, 64, 65, 70, 72, 100, 129, 200, 512, 523, 530, 600, 8192}) {
    EXPECT_EQ(hc_pre_kernel(plan, t), HcPreKernel::row_clusters) << "T " << t;
    EXPECT_EQ(hc_norm_mix_kernel(plan, t), HcPreKernel::row_clusters) << "T " << t;
  }
  HcParams three;
  three.n_hc = 3;
  EXPECT_EQ(hc_pre_kernel(plan_hc_pre(three, 8, Device::cuda), 1), HcPreKernel::grid);
  EXPECT_EQ(hc_pre_kernel(plan_hc_pre(HcParams{}, 8, Device::cpu), 1), HcPreKernel::cpu);
}

// A row's HC-pre outputs are bitwise the same alone (a cluster of one row) and inside batches
// (groups of 8 rows on the small-T clusters at T = 40, tiles of 8 rows on the row clusters at
// T = 70 and 512 (8 blocks per tile) and 600 (2); the row at the start, middle or end of its
// group); at E = 5120 some lanes of the combine add three chunks, whose order matters.
TEST_F(HcGpu, PreRowsDoNotDependOnTheBatchSize) {
  for (const auto& [rows, strided, embd] :
       {std::tuple<std::int64_t, bool, std::int64_t>{40, false, 4096},
        {70, true, 4096},
        {512, true, 4096},
        {40, false, 5120},
        {70, true, 5120},
        {600, false, 4096}}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", T " + std::to_string(rows) + ", E " +
                 std::to_string(embd));
    HcParams params;
    params.embd = embd;
    const HcProblem batch = make_hc_problem(params, rows, seed, strided);
    const auto all = testing::run_pre_on_gpu(batch);
    const std::int64_t e = batch.params.embd;
    const int m = batch.mix_width();
    for (std::int64_t row : {std::int64_t{0}, std::int64_t{7}, std::int64_t{8}, rows - 1}) {
      HcProblem single = batch;
      single.rows = 1;
      single.x.assign(batch.x.begin() + row * batch.x_row_stride,
                      batch.x.begin() + (row + 1) * batch.x_row_stride);
      single.mix.resize(static_cast<std::size_t>(m));
      const auto one = testing::run_pre_on_gpu(single);
      EXPECT_TRUE(testing::bitwise_equal(testing::float_row(all.mix, row, m), one.mix)) << row;
      EXPECT_TRUE(testing::bitwise_equal(testing::float_row(all.split, row, m), one.split));
      EXPECT_TRUE(testing::bitwise_equal(testing::float_row(all.normed, row, e), one.normed));
    }
  }
}

// An HC-pre problem of `rows` rows (T) on the GPU, with its plan and a zeroed workspace.
struct GpuPreCase {
  HcProblem problem;
  testing::HcDeviceInputs in{problem, Device::cuda};
  HcPrePlan plan = plan_hc_pre(problem.params, problem.rows, Device::cuda);
  Buffer workspace = testing::zeroed_workspace(plan);

  GpuPreCase(std::int64_t rows, std::uint64_t seed, bool strided)
      : problem(make_hc_problem(HcParams{}, rows, seed, strided)) {}
};

// A device copy of p's mix weights that starts one element past a 16-byte boundary, and its
// [M, n·E] view: the grid kernel's scalar loads.
struct MisalignedMixWeights {
  Buffer buffer;
  TensorView view;
};

MisalignedMixWeights misaligned_mix_weights(const HcProblem& p) {
  std::vector<std::uint16_t> shifted(p.mix_weight.size() + 1, 0);
  std::copy(p.mix_weight.begin(), p.mix_weight.end(), shifted.begin() + 1);
  MisalignedMixWeights w{testing::to_device(Device::cuda, shifted), {}};
  w.view =
      testing::strided_view(w.buffer, DType::f16, {p.mix_width(), p.width()}, {p.width(), 1}, 1);
  return w;
}

// The cluster kernels (16-byte aligned W: one row per cluster, or groups of 8 rows, the last one
// partial, at T ≤ 33; tiles of 8 rows on the row clusters at T = 70, 200 and 600) and the grid
// kernel (W one element off alignment: scalar loads, groups of 4 or 8 rows) give the same bits in
// every output of HC-pre.
TEST_F(HcGpu, PreClusterAndGridKernelsAgreeBitwise) {
  for (std::int64_t rows : {1, 3, 8, 13, 33, 70, 200, 600}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", T " + std::to_string(rows));
    GpuPreCase pre_case(rows, seed, false);
    auto& [p, in, plan, workspace] = pre_case;
    const MisalignedMixWeights w = misaligned_mix_weights(p);
    const testing::PreOutputs cluster = testing::run_pre(in, plan, workspace, 1);
    const testing::PreOutputs grid = testing::run_pre(in, plan, workspace, 1, w.view);
    EXPECT_TRUE(testing::bitwise_equal(cluster.mix, grid.mix)) << "mix";
    EXPECT_TRUE(testing::bitwise_equal(cluster.split, grid.split)) << "split";
    EXPECT_TRUE(testing::bitwise_equal(cluster.collapsed, grid.collapsed)) << "collapsed";
    EXPECT_TRUE(testing::bitwise_equal(cluster.normed, grid.normed)) << "normed";
  }
}

// x and W that are not 16-byte aligned take the grid kernel's scalar loads; the values, and so
// the results, are those of the cluster kernels' 16-byte loads (T = 5: one row per cluster,
// T = 33: groups of 8 rows, T = 70 and 600: the row clusters, 8 and 2 blocks per tile).
TEST_F(HcGpu, NormMixLoadPathsAgreeBitwise) {
  for (std::int64_t rows : {5, 33, 70, 600}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", T " + std::to_string(rows));
    GpuPreCase pre_case(rows, seed, true);
    auto& [p, in, plan, workspace] = pre_case;
    const int m = p.mix_width();
    const auto norm_mix = [&](const TensorView& x, const TensorView& weight) {
      Buffer mix = testing::poisoned(Device::cuda, p.rows * m);
      hc_norm_mix(plan, x, weight, mix.view(DType::f32, {p.rows, m}),
                  workspace.view(DType::u8, {workspace.bytes()}));
      return testing::to_host<float>(mix);
    };
    std::vector<float> x_shifted(p.x.size() + 1, 0.0f);
    std::copy(p.x.begin(), p.x.end(), x_shifted.begin() + 1);
    Buffer x_d = testing::to_device(Device::cuda, x_shifted);
    const TensorView x_view =
        testing::strided_view(x_d, DType::f32, {p.rows, p.params.n_hc, p.params.embd},
                              {p.x_row_stride, p.x_stream_stride, 1}, 1);
    const MisalignedMixWeights w = misaligned_mix_weights(p);
    const auto vector = norm_mix(in.x_view(), in.mix_weight_view());
    EXPECT_TRUE(testing::bitwise_equal(norm_mix(x_view, in.mix_weight_view()), vector)) << "x";
    EXPECT_TRUE(testing::bitwise_equal(norm_mix(in.x_view(), w.view), vector)) << "W";
    EXPECT_TRUE(testing::bitwise_equal(norm_mix(x_view, w.view), vector)) << "both";
  }
}

// One workspace serves runs of different T (different group sizes and counters) in turn.
TEST_F(HcGpu, PreWorkspaceServesEveryBatchSizeInTurn) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const HcProblem full = make_hc_problem(HcParams{}, 512, seed, false);
  const HcPrePlan plan = plan_hc_pre(full.params, full.rows, Device::cuda);
  Buffer workspace = testing::zeroed_workspace(plan);
  for (std::int64_t rows : {512, 5, 100, 1, 64, 512}) {
    SCOPED_TRACE("T " + std::to_string(rows));
    HcProblem p = full;
    p.rows = rows;
    testing::HcDeviceInputs in(p, Device::cuda);
    const auto shared = testing::run_pre(in, plan, workspace, 1);
    const HcPrePlan own = plan_hc_pre(p.params, rows, Device::cuda);
    Buffer own_workspace = testing::zeroed_workspace(own);
    EXPECT_TRUE(shared == testing::run_pre(in, own, own_workspace, 1));
  }
}

// A NaN in one row's x stays in that row, also when the row shares a tile of 8 rows or, at
// T = 3, a group of 4.
TEST_F(HcGpu, NanInOneRowLeavesTheOtherRowsAlone) {
  for (std::int64_t rows : {3, 40, 72}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", T " + std::to_string(rows));
    const HcProblem clean = make_hc_problem(HcParams{}, rows, seed, false);
    HcProblem dirty = clean;
    const std::int64_t bad = rows / 2;
    dirty.x[static_cast<std::size_t>(bad * clean.x_row_stride + 123)] =
        std::numeric_limits<float>::quiet_NaN();
    const auto want = testing::run_pre_on_gpu(clean);
    const auto got = testing::run_pre_on_gpu(dirty);
    const std::int64_t e = clean.params.embd;
    const int m = clean.mix_width();
    for (std::int64_t t = 0; t < rows; ++t) {
      if (t == bad) {
        EXPECT_TRUE(std::isnan(got.mix[static_cast<std::size_t>(t * m)]));
        EXPECT_TRUE(std::isnan(got.normed[static_cast<std::size_t>(t * e)]));
        continue;
      }
      EXPECT_TRUE(testing::bitwise_equal(testing::float_row(got.mix, t, m),
                                         testing::float_row(want.mix, t, m)))
          << "row " << t;
      EXPECT_TRUE(testing::bitwise_equal(testing::float_row(got.normed, t, e),
                                         testing::float_row(want.normed, t, e)))
          << "row " << t;
    }
  }
}

// Every output of one decode layer's HC chain on `stream`: attention HC-pre, expand with the
// attention output, FFN HC-pre, then the Q8_0 shared-expert matvec + expand. Outputs are
// poisoned first; with synchronise_each the stream is drained after every call, else only at
// the end. (Unused in a build without the CUDA backend.)
[[maybe_unused]] std::vector<std::vector<float>> run_layer_chain(
    const HcProblem& p, const testing::HcDeviceInputs& in, const TensorView& weight,
    const TensorView& hidden, Device device, Stream stream, bool synchronise_each) {
  const std::int64_t t = p.rows;
  const std::int64_t e = p.params.embd;
  const int n = p.params.n_hc;
  const int m = p.mix_width();
  const HcPrePlan plan = plan_hc_pre(p.params, t, device);
  Buffer workspace = testing::zeroed_workspace(plan);
  std::vector<Buffer> out;
  for (const std::int64_t count :
       {t * m, t * m, t * e, t * e, t * n * e, t * m, t * m, t * e, t * e, t * e, t * n * e}) {
    out.push_back(testing::poisoned(device, count));
  }
  synchronize();  // the poisoning ran on the legacy stream
  const auto step = [&] {
    if (synchronise_each) synchronize(stream);
  };
  const auto pre = [&](const TensorView& x, int first) {
    hc_pre(plan, x, in.mix_weight_view(), in.scale_view(), in.base_view(), in.norm_weight_view(),
           out[first].view(DType::f32, {t, m}), out[first + 1].view(DType::f32, {t, m}),
           out[first + 2].view(DType::f32, {t, e}), out[first + 3].view(DType::f32, {t, e}),
           workspace.view(DType::u8, {workspace.bytes()}), stream);
    step();
  };
  const TensorView mid = out[4].view(DType::f32, {t, n, e});
  pre(in.x_view(), 0);
  hc_expand(p.params, in.block_view(), TensorView{}, in.x_view(), testing::post_view(out[1], t, n),
            testing::comb_view(out[1], t, n), mid, stream);
  step();
  pre(mid, 5);
  hc_expand_shared_q8(p.params, weight, hidden, in.add_view(), out[9].view(DType::f32, {t, e}), mid,
                      testing::post_view(out[6], t, n), testing::comb_view(out[6], t, n),
                      out[10].view(DType::f32, {t, n, e}), stream);
  synchronize(stream);
  std::vector<std::vector<float>> host;
  for (const Buffer& b : out) host.push_back(testing::to_host<float>(b));
  return host;
}

// The decode layer's kernels are dependent launches (src/common/dependent_launch.cuh): each may
// start before the one before it ends and must wait for it before touching its outputs. Back to
// back on one stream, the chain gives bitwise the results of the same calls with the stream
// drained after each, at T = 1 and 3 (clusters, Q8_0 decode kernels).
TEST_F(HcGpu, LayerChainBackToBackEqualsDrainedCalls) {
#ifdef TURBODECODE_WITH_CUDA
  constexpr std::int64_t kCols = 2048;
  for (std::int64_t rows : {1, 3}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", T " + std::to_string(rows));
    const HcProblem p = make_hc_problem(HcParams{}, rows, seed, false);
    testing::HcDeviceInputs in(p, Device::cuda);
    Buffer weight =
        testing::to_device(Device::cuda, testing::random_q8_weight(p.params.embd, kCols, seed + 1));
    Buffer hidden = testing::to_device(
        Device::cuda, testing::gaussian(static_cast<std::size_t>(rows * kCols), seed + 2));
    const TensorView weight_v = weight.view(DType::u8, {p.params.embd, q8_row_bytes(kCols)});
    const TensorView hidden_v = hidden.view(DType::f32, {rows, kCols});
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    const auto drained =
        run_layer_chain(p, in, weight_v, hidden_v, Device::cuda, Stream{stream}, true);
    const auto back_to_back =
        run_layer_chain(p, in, weight_v, hidden_v, Device::cuda, Stream{stream}, false);
    cudaStreamDestroy(stream);
    for (std::size_t i = 0; i < drained.size(); ++i) {
      EXPECT_TRUE(testing::bitwise_equal(back_to_back[i], drained[i])) << "output " << i;
      EXPECT_FALSE(std::isnan(drained[i][0])) << "output " << i << " was not written";
    }
  }
#endif
}

TEST_F(HcGpu, PreReplaysFromACudaGraph) {
#ifdef TURBODECODE_WITH_CUDA
  for (std::int64_t rows : {1, 32, 512}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", T " + std::to_string(rows));
    GpuPreCase pre_case(rows, seed, false);
    auto& [p, in, plan, workspace] = pre_case;
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

// T ≤ 4: the CUDA-core kernel; T > 4: the tensor-core one (q8_mma_matvec.cu) in its short
// shape (32 × 32 tiles) and, from 128 tiles of 128 × 64 up, its prefill shape: ragged rows and
// tokens, padded weight rows (starts not 16-byte aligned), an odd number of Q8_0 blocks (a short
// last stage).
TEST_F(HcGpu, Q8Matvec) {
  for (const auto& [rows, cols, tokens, pad] : {std::array<std::int64_t, 4>{4096, 2048, 1, 0},
                                                {37, 96, 3, 2},
                                                {4096, 4096, 2, 6},
                                                {4096, 2048, 512, 0},
                                                {37, 96, 67, 2},
                                                {130, 2080, 9, 6},
                                                {4100, 96, 250, 2}}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", rows " + std::to_string(rows));
    const auto gpu = testing::check_q8_matvec(Device::cuda, rows, cols, tokens, pad, seed);
    const auto cpu = testing::check_q8_matvec(Device::cpu, rows, cols, tokens, pad, seed);
    EXPECT_LE(testing::relative_l2(
                  gpu, testing::widen(cpu.data(), static_cast<std::int64_t>(cpu.size()))),
              testing::kHcTolerance);
  }
}

// T = 33: the tensor-core matvec, then the standalone expand.
TEST_F(HcGpu, ExpandQ8EqualsMatvecThenExpand) {
  for (bool shared : {false, true}) {
    for (const auto& [n_hc, rows] :
         {std::pair{4, 1}, std::pair{4, 3}, std::pair{3, 2}, std::pair{4, 33}}) {
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

// The tensor-core matvec with input rows that are not 16-byte aligned (4-byte copies), a weight
// that starts 2 bytes into its buffer, and an output row stride: gaps stay poisoned.
TEST_F(HcGpu, Q8MatvecStridedOperands) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::int64_t rows = 70, cols = 160, tokens = 37;
  const std::int64_t row_bytes = q8_row_bytes(cols), weight_stride = row_bytes + 4;
  const std::int64_t input_stride = cols + 1, out_stride = rows + 3;
  const auto packed = testing::random_q8_weight(rows, cols, seed);
  std::vector<std::uint8_t> weight(static_cast<std::size_t>(2 + rows * weight_stride), 0xAB);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(weight.data() + 2 + r * weight_stride, packed.data() + r * row_bytes, row_bytes);
  }
  const auto input = testing::gaussian(static_cast<std::size_t>(1 + tokens * input_stride), seed);
  Buffer weight_d = testing::to_device(Device::cuda, weight);
  Buffer input_d = testing::to_device(Device::cuda, input);
  Buffer out = testing::poisoned(Device::cuda, tokens * out_stride);
  q8_matvec(testing::strided_view(weight_d, DType::u8, {rows, row_bytes}, {weight_stride, 1}, 2),
            testing::strided_view(input_d, DType::f32, {tokens, cols}, {input_stride, 1}, 1),
            testing::strided_view(out, DType::f32, {tokens, rows}, {out_stride, 1}));
  const auto got = testing::to_host<float>(out);
  const auto w = oracle::q8_dequantize(packed.data(), rows, cols, row_bytes);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const auto want =
        oracle::matvec(w, testing::widen(input.data() + 1 + t * input_stride, cols), rows, cols);
    const std::vector<float> row(got.begin() + t * out_stride, got.begin() + t * out_stride + rows);
    EXPECT_LE(testing::relative_l2(row, want), testing::kHcTolerance) << "token " << t;
    for (std::int64_t r = rows; r < out_stride; ++r) {
      EXPECT_TRUE(std::isnan(got[t * out_stride + r])) << "gap written, token " << t;
    }
  }
}

using TokenSlice = std::pair<std::int64_t, std::int64_t>;  // first token, count

// Runs q8_matvec on `tokens` input rows at once and on each slice of them, and expects every
// slice's outputs to equal, bitwise, the same tokens' outputs of the whole batch. Weight rows
// are `pad_bytes` longer than packed, which moves their starts modulo 4 and 16.
void expect_q8_rows_batch_invariant(std::int64_t rows, std::int64_t cols, std::int64_t pad_bytes,
                                    std::int64_t tokens, std::initializer_list<TokenSlice> slices) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::int64_t row_bytes = q8_row_bytes(cols), stride = row_bytes + pad_bytes;
  const auto packed = testing::random_q8_weight(rows, cols, seed);
  std::vector<std::uint8_t> padded(static_cast<std::size_t>(rows * stride), 0xAB);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(padded.data() + r * stride, packed.data() + r * row_bytes, row_bytes);
  }
  const auto input = testing::gaussian(static_cast<std::size_t>(tokens * cols), seed + 1);
  Buffer weight_d = testing::to_device(Device::cuda, padded);
  Buffer input_d = testing::to_device(Device::cuda, input);
  const TensorView weight =
      testing::strided_view(weight_d, DType::u8, {rows, row_bytes}, {stride, 1});
  const auto run = [&](std::int64_t first, std::int64_t count) {
    Buffer out = testing::poisoned(Device::cuda, count * rows);
    q8_matvec(weight,
              testing::strided_view(input_d, DType::f32, {count, cols}, {cols, 1}, first * cols),
              out.view(DType::f32, {count, rows}));
    return testing::to_host<float>(out);
  };
  const auto all = run(0, tokens);
  for (const auto& [first, count] : slices) {
    const auto part = run(first, count);
    const std::vector<float> same(all.begin() + first * rows, all.begin() + (first + count) * rows);
    EXPECT_TRUE(testing::bitwise_equal(part, same)) << "tokens " << first << " + " << count;
  }
}

// Rows of the tensor-core path do not depend on the batch: tokens computed with 299 others
// (prefill shape) equal, bitwise, the same tokens in batches of 7 and 65 (short shape).
TEST_F(HcGpu, Q8MatvecPrefillIsBatchInvariant) {
  expect_q8_rows_batch_invariant(4096, 256, 0, 300, {{0, 7}, {200, 65}});
}

// Rows of the CUDA-core path (T ≤ 4) do not depend on the batch: each token alone, and tokens
// 1 .. 3 as a batch of 3, equal bitwise the same tokens in a batch of 4. 65 blocks per row (a
// second span of one block) and weight rows 2 bytes longer than packed, so that row starts
// alternate between the two alignments modulo 4.
TEST_F(HcGpu, Q8MatvecDecodeIsBatchInvariant) {
  expect_q8_rows_batch_invariant(300, 2080, 2, 4, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {1, 3}});
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
                                         std::tuple{4, std::int64_t{512}, std::int64_t{3}},
                                         std::tuple{4, std::int64_t{256}, std::int64_t{12}},
                                         std::tuple{4, std::int64_t{256}, std::int64_t{60}},
                                         std::tuple{4, std::int64_t{64}, std::int64_t{530}},
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
  // The tensor-core matvec through 4 pipeline stages (3 buffers reused).
  testing::check_q8_matvec(Device::cuda, 40, 256, 37, 2, testing::fresh_seed());
}

}  // namespace
}  // namespace turbodecode
