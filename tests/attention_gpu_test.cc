// Decode attention on the CUDA backend (SPEC §2, §5): against the double-precision oracle and
// the CPU backend over the option matrix, NaN-poisoned outputs, determinism and batch
// invariance bitwise, and CUDA-graph replay as lengths grow. Tests named *Sanitizer* are the
// small subset meant for compute-sanitizer (racecheck, synccheck).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_cases.h"
#include "common/cuda_runtime.h"
#include "common/f16.h"
#include "reference/attention_oracle.h"
#include "test_support.h"
#include "turbodecode/attention.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

#ifdef TURBODECODE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace turbodecode {
namespace {

using testing::fresh_seed;

constexpr double kTolerance = 2e-3;

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible"

// Random contents for every row of a host cache: F16 rows ~ N(0, 1), TQ codes uniform over
// the codebook, norms of the size rows of N(0, 1) values have.
void fill_random(const KvCacheView& cache, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  testing::fill_random_cache(cache, rng, [&] { return f32_to_f16(normal(rng)); });
}

// A cache with the same bytes on the host and on the device.
struct MirroredCache {
  MirroredCache(KvCacheConfig config, std::uint64_t seed)
      : host(with_device(config, Device::cpu)), device(with_device(config, Device::cuda)) {
    fill_random(host.view(), seed);
    const KvCacheView& from = host.view();
    const KvCacheView& to = device.view();
    for (auto [dst, src] : {std::pair{to.k, from.k}, std::pair{to.k_norms, from.k_norms},
                            std::pair{to.v, from.v}, std::pair{to.v_norms, from.v_norms}}) {
      if (src.present()) cuda::copy_to_device(dst.data, src.data, src.span_bytes());
    }
  }
  static KvCacheConfig with_device(KvCacheConfig config, Device device) {
    config.device = device;
    return config;
  }
  KvCache host, device;
};

// Device tensors of one run_decode call; out is NaN-poisoned before every run.
struct DeviceCall {
  DeviceCall(const DecodePlan& plan, const std::vector<float>& q,
             const std::vector<std::int32_t>& slots, const std::vector<std::int32_t>& positions)
      : n(static_cast<std::int64_t>(slots.size())),
        heads(plan.options.n_heads),
        dim(plan.cache.head_dim),
        q_buffer(testing::to_device(Device::cuda, q)),
        out_buffer(Device::cuda, n * heads * dim * 4),
        slot_buffer(testing::to_device(Device::cuda, slots)),
        pos_buffer(testing::to_device(Device::cuda, positions)),
        workspace_buffer(Device::cuda, plan.workspace_bytes) {}

  void run(const DecodePlan& plan, const KvCacheView& cache, Stream stream = {}) {
    out_buffer.fill_bytes(0xFF);
    launch(plan, cache, stream);
    synchronize(stream);
  }
  void launch(const DecodePlan& plan, const KvCacheView& cache, Stream stream) const {
    run_decode(plan, cache, q_buffer.view(DType::f32, {n, heads, dim}),
               slot_buffer.view(DType::i32, {n}), pos_buffer.view(DType::i32, {n}),
               out_buffer.view(DType::f32, {n, heads, dim}),
               workspace_buffer.view(DType::u8, {workspace_buffer.bytes()}), stream);
  }
  std::vector<float> output() const { return testing::to_host<float>(out_buffer); }

  std::int64_t n, heads, dim;
  Buffer q_buffer, out_buffer, slot_buffer, pos_buffer, workspace_buffer;
};

std::vector<float> run_cpu(const KvCacheView& cache, const DecodeOptions& options,
                           const std::vector<float>& q, const std::vector<std::int32_t>& slots,
                           const std::vector<std::int32_t>& positions) {
  const auto n = static_cast<std::int64_t>(slots.size());
  const DecodePlan plan = plan_decode(cache.config, options, n);
  const std::int64_t dim = cache.config.head_dim;
  std::vector<float> q_copy = q, out(static_cast<std::size_t>(n * options.n_heads * dim), NAN);
  std::vector<std::int32_t> slot_copy = slots, pos_copy = positions;
  std::vector<std::uint8_t> workspace(static_cast<std::size_t>(plan.workspace_bytes) + 64);
  run_decode(plan, cache,
             TensorView::contiguous(q_copy.data(), DType::f32, {n, options.n_heads, dim}),
             TensorView::contiguous(slot_copy.data(), DType::i32, {n}),
             TensorView::contiguous(pos_copy.data(), DType::i32, {n}),
             TensorView::contiguous(out.data(), DType::f32, {n, options.n_heads, dim}),
             TensorView::contiguous(workspace.data(), DType::u8, {plan.workspace_bytes}));
  return out;
}

std::vector<double> widen(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

// One attention problem: a cache, options and a batch of queries.
struct Problem {
  KvCacheConfig cache;
  DecodeOptions options;
  std::vector<std::int32_t> slots, positions;

  std::string describe() const {
    std::string s =
        "D=" + std::to_string(cache.head_dim) + " K=" + format_name(cache.k_format) +
        " V=" + format_name(cache.v_format) +
        " kind=" + (cache.kind == LayerKind::ring ? "ring" : "linear") +
        " cap=" + std::to_string(cache.capacity) + " kv_heads=" + std::to_string(cache.n_kv_heads) +
        " heads=" + std::to_string(options.n_heads) +
        " mask=" + std::to_string(static_cast<int>(options.mask)) +
        " window=" + std::to_string(options.sliding_window) +
        " scale=" + std::to_string(options.scale) + " softcap=" + std::to_string(options.softcap) +
        " rotated=" + std::to_string(options.rotated_output) +
        " splits=" + std::to_string(options.fixed_splits) + " pos=";
    for (auto p : positions) s += std::to_string(p) + ",";
    return s;
  }
};

// Runs a problem on the GPU, the CPU and the oracle and checks both errors.
void check_against_references(const Problem& problem, const MirroredCache& cache,
                              std::uint64_t seed) {
  SCOPED_TRACE(problem.describe() + " seed=" + std::to_string(seed));
  KvCacheConfig gpu_config = problem.cache;
  gpu_config.device = Device::cuda;
  const DecodePlan plan =
      plan_decode(gpu_config, problem.options, static_cast<std::int64_t>(problem.slots.size()));
  const std::vector<float> q = testing::gaussian(
      problem.slots.size() *
          static_cast<std::size_t>(problem.options.n_heads * problem.cache.head_dim),
      seed);
  DeviceCall call(plan, q, problem.slots, problem.positions);
  call.run(plan, cache.device.view());
  const std::vector<float> gpu = call.output();
  const std::vector<double> oracle = oracle::decode_attention(cache.host.view(), problem.options, q,
                                                              problem.slots, problem.positions)
                                         .out;
  const std::vector<float> cpu =
      run_cpu(cache.host.view(), problem.options, q, problem.slots, problem.positions);
  EXPECT_LE(testing::relative_l2(gpu, oracle), kTolerance) << "vs oracle";
  EXPECT_LE(testing::relative_l2(gpu, widen(cpu)), kTolerance) << "vs CPU backend";
}

// Queries of a problem: a mix of slots and lengths covering tile, split and ring edges.
void add_queries(Problem& problem) {
  const std::int32_t cap = static_cast<std::int32_t>(problem.cache.capacity);
  const std::vector<std::int32_t> linear = {0, 31, 32, 130, cap - 1};
  const std::vector<std::int32_t> ring = {0, 100, cap - 1, cap, 2 * cap + 37};
  const auto& positions = problem.cache.kind == LayerKind::ring ? ring : linear;
  for (std::size_t i = 0; i < positions.size(); ++i) {
    problem.slots.push_back(static_cast<std::int32_t>(i % problem.cache.slots));
    problem.positions.push_back(positions[i]);
  }
}

using MatrixParam = std::tuple<int, RowFormat, RowFormat, MaskKind>;

class AttentionGpuMatrix : public ::testing::TestWithParam<MatrixParam> {};

// Every head dim × K format × V format × mask kind; per cache, GQA groups 1, 2, 3 (padded
// heads), 8 and 16 (two head chunks), with split counts and options rotating through
// automatic/7/1 splits, scale and softcap, windows and rotated output.
TEST_P(AttentionGpuMatrix, MatchesOracleAndCpu) {
  SKIP_WITHOUT_GPU();
  const auto [head_dim, k_format, v_format, mask] = GetParam();
  const bool ring = mask == MaskKind::sliding_ring;
  KvCacheConfig config;
  config.slots = 3;
  config.n_kv_heads = 2;
  config.capacity = ring ? 160 : 300;
  config.head_dim = head_dim;
  config.kind = ring ? LayerKind::ring : LayerKind::linear;
  config.k_format = k_format;
  config.v_format = v_format;
  config.scale_factor_d512 = 1.25f;
  const std::uint64_t seed = fresh_seed();
  const MirroredCache cache(config, seed);
  const int groups[] = {1, 2, 3, 8, 16};
  // Each group runs one of the three option variants, rotating with the parameters, so every
  // variant meets every head dim, format pair and mask (the oracle dominates the run time).
  const int rotation =
      static_cast<int>(k_format) + static_cast<int>(v_format) + static_cast<int>(mask);
  for (int g = 0; g < 5; ++g) {
    const int group = groups[g];
    const int variant = (g + rotation) % 3;
    Problem problem{config, {}, {}, {}};
    problem.options.n_heads = group * config.n_kv_heads;
    problem.options.mask = mask;
    problem.options.fixed_splits = variant == 0 ? 0 : (variant == 1 ? 7 : 1);
    problem.options.sliding_window = mask == MaskKind::causal ? 0 : (variant == 0 ? 0 : 64);
    if (variant == 1) {
      problem.options.scale = 1.0f / 8.0f;
      problem.options.softcap = 5.0f;
    }
    problem.options.rotated_output = variant == 2;
    add_queries(problem);
    check_against_references(problem, cache, seed + static_cast<std::uint64_t>(group));
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllOptions, AttentionGpuMatrix,
    ::testing::Combine(::testing::Values(256, 512),
                       ::testing::Values(RowFormat::f16, RowFormat::tq8, RowFormat::tq4),
                       ::testing::Values(RowFormat::tq4, RowFormat::tq5, RowFormat::tq6,
                                         RowFormat::tq8, RowFormat::f16),
                       ::testing::Values(MaskKind::causal, MaskKind::sliding_linear,
                                         MaskKind::sliding_ring)));

// The largest split count the CUDA merge takes (1024): each of its 16 warps then folds up to 64
// splits, so the states of a warp's 33rd split and later come from the lanes' second batch.
// A query of 20000 positions fills 625 splits of 32 positions (the rest are empty); shorter
// queries leave more empty splits.
TEST(AttentionGpu, MergesTheLargestSplitCount) {
  SKIP_WITHOUT_GPU();
  for (const int head_dim : {256, 512}) {
    KvCacheConfig config;
    config.slots = 2;
    config.n_kv_heads = 1;
    config.capacity = 20000;
    config.head_dim = head_dim;
    config.v_format = RowFormat::tq8;
    const std::uint64_t seed = fresh_seed();
    const MirroredCache cache(config, seed);
    Problem problem{config, {}, {}, {}};
    problem.options.n_heads = 2;
    problem.options.fixed_splits = 1024;
    problem.slots = {0, 1, 0};
    problem.positions = {19999, 16400, 600};
    check_against_references(problem, cache, seed);
  }
}

// A small problem per kernel family, for compute-sanitizer's slower tools.
TEST(AttentionGpuSanitizer, SmallProblems) {
  SKIP_WITHOUT_GPU();
  struct Small {
    int head_dim;
    RowFormat k, v;
    MaskKind mask;
    int group;
    int splits;
  };
  const Small smalls[] = {{256, RowFormat::f16, RowFormat::tq8, MaskKind::sliding_ring, 2, 0},
                          {512, RowFormat::tq4, RowFormat::tq4, MaskKind::causal, 8, 3},
                          {256, RowFormat::tq8, RowFormat::f16, MaskKind::causal, 3, 7}};
  for (const Small& s : smalls) {
    KvCacheConfig config;
    config.slots = 2;
    config.n_kv_heads = 2;
    config.capacity = 160;
    config.head_dim = s.head_dim;
    config.kind = s.mask == MaskKind::sliding_ring ? LayerKind::ring : LayerKind::linear;
    config.k_format = s.k;
    config.v_format = s.v;
    const std::uint64_t seed = fresh_seed();
    const MirroredCache cache(config, seed);
    Problem problem{config, {}, {}, {}};
    problem.options.n_heads = s.group * config.n_kv_heads;
    problem.options.mask = s.mask;
    problem.options.fixed_splits = s.splits;
    add_queries(problem);
    check_against_references(problem, cache, seed);
  }
}

// The long-context case of the determinism, invariance and graph tests: a cache with random
// contents from `seed` on host and device (`config` describes the device copy) and options
// for `n_heads` query heads.
struct LongCase {
  LongCase(RowFormat v_format, int n_heads, std::uint64_t seed)
      : config(host_config(v_format)), cache(config, seed) {
    config.device = Device::cuda;
    options.n_heads = n_heads;
  }
  static KvCacheConfig host_config(RowFormat v_format) {
    KvCacheConfig config;
    config.slots = 4;
    config.n_kv_heads = 2;
    config.capacity = 6000;
    config.head_dim = 256;
    config.v_format = v_format;
    return config;
  }

  KvCacheConfig config;
  MirroredCache cache;
  DecodeOptions options;
};

std::vector<float> query_rows(const std::vector<float>& q, std::int64_t first, std::int64_t count,
                              std::int64_t row_floats) {
  return {q.begin() + first * row_floats, q.begin() + (first + count) * row_floats};
}

// Runs the queries as one batch, checks it against the oracle and checks that each query run
// alone gives the same bits (SPEC §2.6); returns the batch's output.
std::vector<float> run_batch_and_alone(const LongCase& long_case,
                                       const std::vector<std::int32_t>& slots,
                                       const std::vector<std::int32_t>& positions,
                                       std::uint64_t seed) {
  const auto& [config, cache, options] = long_case;
  const auto n = static_cast<std::int64_t>(slots.size());
  const DecodePlan plan = plan_decode(config, options, n);
  const std::int64_t row_floats = options.n_heads * config.head_dim;
  const std::vector<float> q = testing::gaussian(static_cast<std::size_t>(n * row_floats), seed);
  DeviceCall batch(plan, q, slots, positions);
  batch.run(plan, cache.device.view());
  const std::vector<float> together = batch.output();
  EXPECT_LE(
      testing::relative_l2(
          together, oracle::decode_attention(cache.host.view(), options, q, slots, positions).out),
      kTolerance);
  for (std::int64_t i = 0; i < n; ++i) {
    DeviceCall alone(plan, query_rows(q, i, 1, row_floats), {slots[i]}, {positions[i]});
    alone.run(plan, cache.device.view());
    EXPECT_EQ(alone.output(), query_rows(together, i, 1, row_floats)) << "query " << i;
  }
  return together;
}

// The same call twice gives the same bits, and each query's output is the same whether it runs
// alone or in a batch of other lengths (SPEC §2.6).
TEST(AttentionGpu, DeterministicAndBatchInvariant) {
  SKIP_WITHOUT_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const LongCase long_case(RowFormat::tq8, 16, seed);
  const std::vector<std::int32_t> slots = {0, 1, 2, 3, 1};
  const std::vector<std::int32_t> positions = {5999, 0, 4000, 700, 129};
  const std::vector<float> first = run_batch_and_alone(long_case, slots, positions, seed);
  EXPECT_EQ(first, run_batch_and_alone(long_case, slots, positions, seed))
      << "two identical runs differ";
}

// A batch large enough that each split block takes several consecutive splits of its query
// (64 queries × 512 splits per KV head fill at least 32 waves of resident split blocks on any
// device, as a wave holds at most 1024 splits per KV head, so blocks take at least two) gives
// each query the bits it gets alone, where every split has its own block, and matches the
// oracle. The lengths leave empty splits and a partial last tile inside multi-split blocks.
TEST(AttentionGpu, BlocksOfSeveralSplitsEqualOneSplitBlocks) {
  SKIP_WITHOUT_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  LongCase long_case(RowFormat::tq8, 4, seed);
  long_case.options.fixed_splits = 512;
  const std::int32_t edges[] = {0, 31, 129, 5999};
  std::vector<std::int32_t> slots, positions;
  for (std::int32_t i = 0; i < 64; ++i) {
    slots.push_back(i % 4);
    positions.push_back(i < 4 ? edges[i] : 37 + 93 * i);
  }
  run_batch_and_alone(long_case, slots, positions, seed);
}

#ifdef TURBODECODE_WITH_CUDA
// A graph captured once for the longest lengths replays correctly as lengths grow (read from
// device memory), equals eager runs bitwise, and writes NaN for a row naming an unknown slot.
TEST(AttentionGpu, GraphReplayFollowsGrowingLengths) {
  SKIP_WITHOUT_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const LongCase long_case(RowFormat::tq4, 4, seed);
  const auto& [config, cache, options] = long_case;
  const DecodePlan plan = plan_decode(config, options, 3);
  const std::int64_t row_floats = options.n_heads * config.head_dim;
  const std::vector<float> q = testing::gaussian(static_cast<std::size_t>(3 * row_floats), seed);
  const std::vector<std::int32_t> slots = {2, 0, 3};
  DeviceCall call(plan, q, slots, {0, 10, 20});
  DeviceCall eager(plan, q, slots, {0, 10, 20});
  cudaStream_t raw = nullptr;
  // A blocking stream: it orders after the legacy-stream copies and fills of the buffers.
  ASSERT_EQ(cudaStreamCreate(&raw), cudaSuccess);
  const Stream stream{raw};
  call.run(plan, cache.device.view(), stream);  // first use outside capture
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(raw, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  call.launch(plan, cache.device.view(), stream);
  ASSERT_EQ(cudaStreamEndCapture(raw, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (std::int32_t step : {0, 150, 1100, 3000, 5979}) {
    std::vector<std::int32_t> now = {step, step + 10, step + 20};
    call.pos_buffer.copy_from_host(now.data(), 12);
    eager.pos_buffer.copy_from_host(now.data(), 12);
    call.out_buffer.fill_bytes(0xFF);
    ASSERT_EQ(cudaGraphLaunch(exec, raw), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(raw), cudaSuccess);
    eager.run(plan, cache.device.view());
    EXPECT_EQ(call.output(), eager.output()) << "step " << step;
    EXPECT_LE(
        testing::relative_l2(
            call.output(), oracle::decode_attention(cache.host.view(), options, q, slots, now).out),
        kTolerance)
        << "step " << step;
  }
  const std::int32_t unknown_slot = 99;
  call.slot_buffer.copy_from_host(&unknown_slot, 4, 4);  // query 1
  call.out_buffer.fill_bytes(0);
  ASSERT_EQ(cudaGraphLaunch(exec, raw), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(raw), cudaSuccess);
  const std::vector<float> out = call.output();
  const std::vector<float> expected = eager.output();
  for (std::int64_t i = 0; i < 3 * row_floats; ++i) {
    const bool bad_row = i / row_floats == 1;
    if (bad_row) {
      ASSERT_TRUE(std::isnan(out[i])) << i;
    } else {
      ASSERT_EQ(out[i], expected[i]) << i;
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(raw);
}
#endif

}  // namespace
}  // namespace turbodecode
