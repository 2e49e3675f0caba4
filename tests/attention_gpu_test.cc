// Decode attention on the CUDA backend (SPEC §2, §5): against the double-precision oracle over
// the option matrix (every K × V format pair, paged and contiguous caches, runs of several
// query tokens, lse), NaN-poisoned outputs; determinism and batch invariance bitwise (a row
// alone, in a run, in a batch); many chunks through both merge levels; CUDA-graph replay as
// lengths grow and block tables change. Tests named *Sanitizer* are the small subset meant for
// compute-sanitizer (racecheck, synccheck).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cache_contents.h"
#include "cpu_decode_call.h"
#include "common/cuda_runtime.h"
#include "decode_cases.h"
#include "reference/attention_oracle.h"
#include "test_support.h"
#include "turbodecode/attention.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

#ifdef TURBODECODE_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/late_copy.h"
#endif

namespace turbodecode {
namespace {

using testing::fresh_seed;

constexpr double kTolerance = 2e-3;
constexpr double kLseTolerance = 1e-3;
using testing::kKFormats;
using testing::kVFormats;

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible"

KvCacheConfig on_device(KvCacheConfig config, Device device) {
  config.device = device;
  return config;
}

// A cache with the same bytes (and block table, when paged) on the host and on the device.
struct MirroredCache {
  MirroredCache(const KvCacheConfig& config, std::uint64_t seed, bool shared_prefix = false)
      : host(on_device(config, Device::cpu)), device(on_device(config, Device::cuda)) {
    testing::fill_random(host.view(), seed);
    copy_contents();
    if (config.page_size > 0) {
      std::mt19937_64 rng(seed + 7);
      table = testing::shuffled_table(config, rng, shared_prefix).entries;
      table_buffer = testing::to_device(Device::cuda, table);
    }
  }
  void copy_contents() const {
    const KvCacheView& from = host.view();
    const KvCacheView& to = device.view();
    for (auto [dst, src] : {std::pair{to.k, from.k}, std::pair{to.k_norms, from.k_norms},
                            std::pair{to.v, from.v}, std::pair{to.v_norms, from.v_norms}}) {
      if (src.present()) cuda::copy_to_device(dst.data, src.data, src.span_bytes());
    }
  }
  TensorView table_view(Device where) const {
    const std::int64_t per_slot = pages_per_slot(host.config());
    if (where == Device::cpu) {
      return TensorView::contiguous(const_cast<std::int32_t*>(table.data()), DType::i32,
                                    {host.config().slots, per_slot});
    }
    return table_buffer.view(DType::i32, {host.config().slots, per_slot});
  }
  KvCacheView host_view() const {
    return host.config().page_size > 0 ? host.view(table_view(Device::cpu)) : host.view();
  }
  KvCacheView device_view() const {
    return device.config().page_size > 0 ? device.view(table_view(Device::cuda)) : device.view();
  }

  KvCache host, device;
  std::vector<std::int32_t> table;
  Buffer table_buffer;
};

// Device tensors of one run_decode call: q (padded rows when asked), out and lse NaN-poisoned
// before every run, the workspace zero-filled once (its counters).
struct DeviceCall {
  DeviceCall(const DecodePlan& plan, const std::vector<float>& q_values,
             const std::vector<std::int32_t>& slots, const std::vector<std::int32_t>& positions,
             std::int64_t row_padding = 0)
      : n(static_cast<std::int64_t>(slots.size())),
        heads(plan.options.n_heads),
        dim(plan.cache.head_dim),
        padded_dim(dim + row_padding),
        q_buffer(Device::cuda, n * heads * padded_dim * 4),
        out_buffer(Device::cuda, n * heads * padded_dim * 4),
        lse_buffer(Device::cuda, n * heads * 4),
        slot_buffer(testing::to_device(Device::cuda, slots)),
        pos_buffer(testing::to_device(Device::cuda, positions)),
        workspace_buffer(Device::cuda, std::max<std::int64_t>(plan.workspace_bytes, 16)) {
    std::vector<float> padded(static_cast<std::size_t>(n * heads * padded_dim), NAN);
    for (std::int64_t r = 0; r < n * heads; ++r) {
      std::copy_n(q_values.begin() + r * dim, dim, padded.begin() + r * padded_dim);
    }
    q_buffer.copy_from_host(padded.data(), q_buffer.bytes());
    workspace_buffer.fill_bytes(0);
  }

  TensorView rows(const Buffer& buffer) const {
    TensorView view = buffer.view(DType::f32, {n, heads, dim});
    view.strides = {heads * padded_dim, padded_dim, 1, 0};
    return view;
  }
  void launch(const DecodePlan& plan, const KvCacheView& cache, Stream stream = {}) const {
    run_decode(plan, cache, rows(q_buffer), slot_buffer.view(DType::i32, {n}),
               pos_buffer.view(DType::i32, {n}), rows(out_buffer),
               lse_buffer.view(DType::f32, {n, heads}),
               workspace_buffer.view(DType::u8, {workspace_buffer.bytes()}), stream);
  }
  void run(const DecodePlan& plan, const KvCacheView& cache, Stream stream = {}) {
    out_buffer.fill_bytes(0xFF);
    lse_buffer.fill_bytes(0xFF);
    launch(plan, cache, stream);
    synchronize(stream);
  }
  // Query row i's output (all heads, contiguous) and lse.
  std::vector<float> output(std::int64_t i) const {
    const std::vector<float> all = testing::to_host<float>(out_buffer);
    std::vector<float> row(static_cast<std::size_t>(heads * dim));
    for (std::int64_t h = 0; h < heads; ++h) {
      std::copy_n(all.begin() + (i * heads + h) * padded_dim, dim, row.begin() + h * dim);
    }
    return row;
  }
  std::vector<float> lse(std::int64_t i) const {
    const std::vector<float> all = testing::to_host<float>(lse_buffer);
    return {all.begin() + i * heads, all.begin() + (i + 1) * heads};
  }

  std::int64_t n, heads, dim, padded_dim;
  Buffer q_buffer, out_buffer, lse_buffer, slot_buffer, pos_buffer, workspace_buffer;
};

std::vector<double> slice(const std::vector<double>& values, std::int64_t first,
                          std::int64_t count) {
  return {values.begin() + first * count, values.begin() + (first + 1) * count};
}

// Runs a case on the GPU and checks every row's output and lse against the oracle; returns
// the worst relative L2 error.
double check_case(const testing::DecodeCase& dc, std::uint64_t seed) {
  SCOPED_TRACE(dc.describe() + " seed=" + std::to_string(seed));
  const MirroredCache cache(dc.cache, seed);
  const DecodePlan plan = plan_decode(on_device(dc.cache, Device::cuda), dc.options,
                                      static_cast<std::int64_t>(dc.slots.size()));
  const std::int64_t row = dc.options.n_heads * dc.cache.head_dim;
  const std::vector<float> q =
      testing::gaussian(static_cast<std::size_t>(dc.slots.size()) * row, seed + 1);
  DeviceCall call(plan, q, dc.slots, dc.positions, dc.row_padding);
  call.run(plan, cache.device_view());
  const oracle::DecodeResult reference =
      oracle::decode_attention(cache.host_view(), dc.options, q, dc.slots, dc.positions);
  const std::vector<double>& expected = reference.out;
  const std::vector<double>& lse = reference.lse;
  double worst = 0.0;
  for (std::int64_t i = 0; i < call.n; ++i) {
    const double error = testing::relative_l2(call.output(i), slice(expected, i, row));
    EXPECT_LE(error, kTolerance) << "query " << i;
    worst = std::max(worst, error);
    const std::vector<float> got = call.lse(i);
    for (std::int64_t h = 0; h < call.heads; ++h) {
      const double want = lse[static_cast<std::size_t>(i * call.heads + h)];
      EXPECT_LE(std::abs(got[static_cast<std::size_t>(h)] - want) / std::max(1.0, std::abs(want)),
                kLseTolerance)
          << "query " << i << " head " << h;
    }
  }
  return worst;
}

// The matrix of decode_cases.h (every visibility × K format × V format, the other options
// rotating: head dims, GQA ratios, query_tokens, chunk sizes, softcap, scale, rotated output,
// padded rows), half of it on paged caches, in four parts that run in parallel.
class AttentionGpuMatrix : public ::testing::TestWithParam<int> {};

TEST_P(AttentionGpuMatrix, MatchesOracle) {
  SKIP_WITHOUT_GPU();
  const std::vector<testing::DecodeCase> cases = testing::decode_matrix(kKFormats, kVFormats);
  double worst = 0.0;
  int checked = 0;
  constexpr int kPageSizes[] = {16, 32, 64, 128};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (static_cast<int>(i % 4) != GetParam()) continue;
    testing::DecodeCase dc = cases[i];
    if (i % 8 >= 4) {  // half the cases on a paged cache, every page size in turn
      dc.cache.page_size = kPageSizes[i / 8 % 4];
      dc.cache.pages = dc.cache.slots * pages_per_slot(dc.cache);
    }
    worst = std::max(worst, check_case(dc, fresh_seed()));
    ++checked;
  }
  std::printf("[ matrix part %d ] %d cases, worst relative L2 %.3g\n", GetParam(), checked, worst);
}

INSTANTIATE_TEST_SUITE_P(Parts, AttentionGpuMatrix, ::testing::Values(0, 1, 2, 3));

// A long-context cache for the invariance, merge and graph tests.
KvCacheConfig long_config(RowFormat k, RowFormat v, int head_dim, int page_size) {
  KvCacheConfig config;
  config.slots = 4;
  config.n_kv_heads = 2;
  config.capacity = 6016;
  config.head_dim = head_dim;
  config.k_format = k;
  config.v_format = v;
  if (page_size > 0) {
    config.page_size = page_size;
    config.pages = config.slots * pages_per_slot(config);
  }
  return config;
}

// Each row's bits are the same alone (a run of one token, a batch of one), inside a run of
// several tokens, and inside a batch of other runs and lengths; two identical calls agree
// bitwise; and the batch matches the oracle (SPEC §2.6, §2.8).
TEST(AttentionGpu, RowsAreBitwiseTheSameAloneInRunsAndInBatches) {
  SKIP_WITHOUT_GPU();
  for (const int head_dim : {256, 512}) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("D=" + std::to_string(head_dim) + " seed=" + std::to_string(seed));
    // The automatic chunk size doubles past 8192 visible positions (256-position chunks, at
    // most 32 of them, then 512, chunks.h): the second run straddles that, so its rows are
    // served in two parts.
    const std::int32_t doubling = 8192;
    KvCacheConfig config = long_config(RowFormat::f16, RowFormat::tq8, head_dim, 16);
    config.n_kv_heads = 1;
    config.capacity = doubling + 64;
    config.pages = config.slots * pages_per_slot(config);
    const MirroredCache cache(config, seed, true);
    DecodeOptions options;
    options.n_heads = 4;
    const int tokens = 4;
    // Runs ending at chunk and tile edges, across the doubling, and from position 0.
    const std::vector<std::int32_t> slots = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
    const std::vector<std::int32_t> positions = {
        125, 126, 127, 128, doubling - 2, doubling - 1, doubling, doubling + 1,
        0,   1,   2,   3,   2044,         2045,         2046,     2047};
    options.query_tokens = tokens;
    const auto n = static_cast<std::int64_t>(slots.size());
    const DecodePlan plan = plan_decode(on_device(config, Device::cuda), options, n);
    ASSERT_LT(plan.chunk_positions(doubling), plan.chunk_positions(doubling + 1));
    const std::int64_t row = options.n_heads * head_dim;
    const std::vector<float> q = testing::gaussian(static_cast<std::size_t>(n * row), seed);
    DeviceCall batch(plan, q, slots, positions);
    batch.run(plan, cache.device_view());
    const std::vector<double> expected =
        oracle::decode_attention(cache.host_view(), options, q, slots, positions).out;
    DeviceCall again(plan, q, slots, positions);
    again.run(plan, cache.device_view());
    DecodeOptions single = options;
    single.query_tokens = 1;
    const DecodePlan single_plan = plan_decode(on_device(config, Device::cuda), single, 1);
    for (std::int64_t i = 0; i < n; ++i) {
      EXPECT_LE(testing::relative_l2(batch.output(i), slice(expected, i, row)), kTolerance)
          << "row " << i;
      EXPECT_EQ(batch.output(i), again.output(i)) << "row " << i << ": two calls differ";
      const std::vector<float> q_row(q.begin() + i * row, q.begin() + (i + 1) * row);
      DeviceCall alone(single_plan, q_row, {slots[i]}, {positions[i]});
      alone.run(single_plan, cache.device_view());
      EXPECT_EQ(alone.output(0), batch.output(i)) << "row " << i << " alone";
      EXPECT_EQ(alone.lse(0), batch.lse(i)) << "row " << i << " alone (lse)";
    }
  }
}

// A row's last merge runs in whichever block finishes its last chunk: a block with more of its
// share to stream folds the states from L2, one that has finished its share first stages them
// in its free pipeline stages (chunk_merge.cuh). Rows of four query heads per KV head (a warp
// folds each column alone) alone, where every block holds one chunk, and inside a batch whose
// chunks are several times the device's blocks, where most rows merge in a block that still
// streams, give the same bits. Lengths of 2100 to 4000 positions (17 to 32 chunks) fill three
// or four quarters of a merge group, so the order in which the quarter sums meet shows.
TEST(AttentionGpu, RowsAreBitwiseTheSameWhicheverBlockMergesThem) {
  SKIP_WITHOUT_GPU();
  for (const int head_dim : {256, 512}) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("D=" + std::to_string(head_dim) + " seed=" + std::to_string(seed));
    KvCacheConfig config = long_config(RowFormat::f16, RowFormat::tq8, head_dim, 0);
    config.n_kv_heads = 1;
    config.capacity = 4096;
    const MirroredCache cache(config, seed);
    DecodeOptions options;
    options.n_heads = 4;
    const std::int64_t n = 512;
    std::vector<std::int32_t> slots, positions;
    for (std::int64_t i = 0; i < n; ++i) {
      slots.push_back(static_cast<std::int32_t>(i % config.slots));
      positions.push_back(static_cast<std::int32_t>(2100 + i * 37 % 1900));
    }
    const DecodePlan plan = plan_decode(on_device(config, Device::cuda), options, n);
    ASSERT_GT(n * (2100 / plan.chunk_positions(2100)), 4 * plan.device_blocks);
    const std::int64_t row = options.n_heads * head_dim;
    const std::vector<float> q = testing::gaussian(static_cast<std::size_t>(n * row), seed);
    DeviceCall batch(plan, q, slots, positions);
    batch.run(plan, cache.device_view());
    const DecodePlan alone_plan = plan_decode(on_device(config, Device::cuda), options, 1);
    for (std::int64_t i = 0; i < n; i += 7) {
      const std::vector<float> q_row(q.begin() + i * row, q.begin() + (i + 1) * row);
      DeviceCall alone(alone_plan, q_row, {slots[i]}, {positions[i]});
      alone.run(alone_plan, cache.device_view());
      EXPECT_EQ(alone.output(0), batch.output(i)) << "row " << i;
    }
  }
}

// Byte address of element (i, j, k) of a view's first three dimensions.
char* element_address(const TensorView& view, std::int64_t i, std::int64_t j, std::int64_t k) {
  return static_cast<char*>(view.data) +
         (i * view.strides[0] + j * view.strides[1] + k * view.strides[2]) *
             static_cast<std::int64_t>(dtype_bytes(view.dtype));
}

// Copies every slot's logical rows of a paged host cache into a contiguous one of the same
// formats, so that both hold the same attention inputs.
void copy_logical_rows(const MirroredCache& paged, const KvCache& contiguous) {
  const KvCacheConfig& c = paged.host.config();
  const KvCacheView& from = paged.host.view();
  const KvCacheView& to = contiguous.view();
  const std::int64_t per_slot = pages_per_slot(c);
  for (auto [dst, src] : {std::pair{to.k, from.k}, std::pair{to.k_norms, from.k_norms},
                          std::pair{to.v, from.v}, std::pair{to.v_norms, from.v_norms}}) {
    if (!src.present()) continue;
    const std::int64_t row_bytes = src.strides[2] * static_cast<std::int64_t>(dtype_bytes(src.dtype));
    for (std::int64_t s = 0; s < c.slots; ++s) {
      for (std::int64_t j = 0; j < per_slot; ++j) {
        const std::int64_t page = paged.table[static_cast<std::size_t>(s * per_slot + j)];
        const std::int64_t rows = std::min<std::int64_t>(c.page_size, c.capacity - j * c.page_size);
        for (std::int64_t h = 0; h < c.n_kv_heads; ++h) {
          std::memcpy(element_address(dst, s, h, j * c.page_size), element_address(src, page, h, 0),
                      static_cast<std::size_t>(rows * row_bytes));
        }
      }
    }
  }
}

// Rows with hundreds of chunks go through both merge levels with many groups, and through
// groups that hold a single chunk; the paged and contiguous caches give the same bits.
TEST(AttentionGpu, ManyChunksMergeInTwoLevelsAndPagingChangesNoBit) {
  SKIP_WITHOUT_GPU();
  for (const RowFormat v : {RowFormat::tq5, RowFormat::fp8}) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string("V=") + format_name(v) + " seed=" + std::to_string(seed));
    const KvCacheConfig paged = long_config(RowFormat::fp8, v, 256, 32);
    KvCacheConfig contiguous = paged;
    contiguous.page_size = 0;
    contiguous.pages = 0;
    const MirroredCache paged_cache(paged, seed);
    MirroredCache contiguous_cache(contiguous, seed);
    copy_logical_rows(paged_cache, contiguous_cache.host);
    contiguous_cache.copy_contents();
    DecodeOptions options;
    options.n_heads = 8;
    options.fixed_chunk_positions = 32;  // 188 chunks, 12 groups for the longest row
    const std::vector<std::int32_t> slots = {0, 1, 2, 3};
    const std::vector<std::int32_t> positions = {6015, 16, 4800, 511};
    const DecodePlan plan = plan_decode(on_device(paged, Device::cuda), options, 4);
    const DecodePlan contiguous_plan = plan_decode(on_device(contiguous, Device::cuda), options, 4);
    const std::int64_t row = options.n_heads * 256;
    const std::vector<float> q = testing::gaussian(static_cast<std::size_t>(4 * row), seed);
    DeviceCall paged_call(plan, q, slots, positions);
    paged_call.run(plan, paged_cache.device_view());
    DeviceCall contiguous_call(contiguous_plan, q, slots, positions);
    contiguous_call.run(contiguous_plan, contiguous_cache.device_view());
    const std::vector<double> expected =
        oracle::decode_attention(paged_cache.host_view(), options, q, slots, positions).out;
    for (std::int64_t i = 0; i < 4; ++i) {
      EXPECT_LE(testing::relative_l2(paged_call.output(i), slice(expected, i, row)), kTolerance);
      EXPECT_EQ(paged_call.output(i), contiguous_call.output(i)) << "row " << i;
    }
  }
}

// A task fold of more than 32 group states (lanes holding several parts): 32-position chunks
// leave the rows here 33 to 98 groups, against the oracle; the rows alone give the same bits.
TEST(AttentionGpu, TaskFoldsOfMoreThan32Groups) {
  SKIP_WITHOUT_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  KvCacheConfig config = long_config(RowFormat::f16, RowFormat::tq8, 256, 0);
  config.slots = 3;
  config.n_kv_heads = 1;
  config.capacity = 100000;
  const MirroredCache cache(config, seed);
  DecodeOptions options;
  options.n_heads = 2;
  options.fixed_chunk_positions = 32;
  const std::vector<std::int32_t> slots = {0, 1, 2};
  const std::vector<std::int32_t> positions = {1023 * 32 + 5, 40000, 99999};  // 33, 40, 98 groups
  const DecodePlan plan = plan_decode(on_device(config, Device::cuda), options, 3);
  const std::int64_t row = options.n_heads * 256;
  const std::vector<float> q = testing::gaussian(static_cast<std::size_t>(3 * row), seed);
  DeviceCall batch(plan, q, slots, positions);
  batch.run(plan, cache.device_view());
  const std::vector<double> expected =
      oracle::decode_attention(cache.host_view(), options, q, slots, positions).out;
  const DecodePlan alone_plan = plan_decode(on_device(config, Device::cuda), options, 1);
  for (std::int64_t i = 0; i < 3; ++i) {
    EXPECT_LE(testing::relative_l2(batch.output(i), slice(expected, i, row)), kTolerance);
    const std::vector<float> q_row(q.begin() + i * row, q.begin() + (i + 1) * row);
    DeviceCall alone(alone_plan, q_row, {slots[i]}, {positions[i]});
    alone.run(alone_plan, cache.device_view());
    EXPECT_EQ(alone.output(0), batch.output(i)) << "row " << i;
  }
}

#ifdef TURBODECODE_WITH_CUDA
// A graph captured once replays correctly as lengths grow and the block table changes (both
// read from device memory), equals eager runs bitwise, and writes NaN for the run of a row
// naming an unknown slot.
TEST(AttentionGpu, GraphReplayFollowsGrowingLengthsAndTables) {
  SKIP_WITHOUT_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const KvCacheConfig config = long_config(RowFormat::tq8, RowFormat::tq4, 256, 64);
  MirroredCache cache(config, seed, true);
  DecodeOptions options;
  options.n_heads = 4;
  options.query_tokens = 2;
  const DecodePlan plan = plan_decode(on_device(config, Device::cuda), options, 4);
  const std::int64_t row = options.n_heads * config.head_dim;
  const std::vector<float> q = testing::gaussian(static_cast<std::size_t>(4 * row), seed);
  const std::vector<std::int32_t> slots = {2, 2, 0, 0};
  DeviceCall call(plan, q, slots, {0, 1, 10, 11});
  DeviceCall eager(plan, q, slots, {0, 1, 10, 11});
  cudaStream_t raw = nullptr;
  ASSERT_EQ(cudaStreamCreate(&raw), cudaSuccess);
  const Stream stream{raw};
  call.run(plan, cache.device_view(), stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(raw, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  call.launch(plan, cache.device_view(), stream);
  ASSERT_EQ(cudaStreamEndCapture(raw, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  std::vector<std::int32_t> table = cache.table;
  std::mt19937_64 rng(seed);
  for (std::int32_t step : {0, 150, 1100, 3000, 5970}) {
    const std::vector<std::int32_t> now = {step, step + 1, step + 40, step + 41};
    call.pos_buffer.copy_from_host(now.data(), 16);
    eager.pos_buffer.copy_from_host(now.data(), 16);
    std::shuffle(table.begin(), table.end(), rng);  // every page still named once
    cache.table_buffer.copy_from_host(table.data(), cache.table_buffer.bytes());
    call.out_buffer.fill_bytes(0xFF);
    ASSERT_EQ(cudaGraphLaunch(exec, raw), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(raw), cudaSuccess);
    eager.run(plan, cache.device_view());
    const KvCacheView host = cache.host.view(TensorView::contiguous(
        table.data(), DType::i32, {config.slots, pages_per_slot(config)}));
    const std::vector<double> expected = oracle::decode_attention(host, options, q, slots, now).out;
    for (std::int64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(call.output(i), eager.output(i)) << "step " << step << " row " << i;
      EXPECT_LE(testing::relative_l2(call.output(i), slice(expected, i, row)), kTolerance)
          << "step " << step << " row " << i;
    }
  }
  const std::int32_t unknown_slot = 99;
  call.slot_buffer.copy_from_host(&unknown_slot, 4, 8);  // row 2: the second run
  ASSERT_EQ(cudaGraphLaunch(exec, raw), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(raw), cudaSuccess);
  for (std::int64_t i = 0; i < 4; ++i) {
    const std::vector<float> out = call.output(i);
    const bool bad_run = i >= 2;
    EXPECT_EQ(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }), bad_run)
        << "row " << i;
    if (!bad_run) {
      EXPECT_EQ(out, eager.output(i)) << "row " << i;
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(raw);
}

// The decode is a dependent launch: its blocks may start while the kernel before it runs, and
// must read nothing before that kernel completes. Captured as one graph: a kernel that lets the
// decode start at once and writes the decode's q only after 200 µs, then the decode. Reading q
// early would give the outputs of the old q.
TEST(AttentionGpu, DecodeReadsNothingBeforeTheKernelBeforeItCompletes) {
  SKIP_WITHOUT_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const KvCacheConfig config = long_config(RowFormat::f16, RowFormat::tq8, 256, 0);
  const MirroredCache cache(config, seed);
  DecodeOptions options;
  options.n_heads = 4;
  const DecodePlan plan = plan_decode(on_device(config, Device::cuda), options, 4);
  const std::int64_t q_bytes = 4 * options.n_heads * config.head_dim * 4;
  const std::vector<float> q = testing::gaussian(static_cast<std::size_t>(q_bytes / 4), seed);
  DeviceCall call(plan, q, {0, 1, 2, 3}, {100, 2000, 4000, 6000});
  call.run(plan, cache.device_view());
  std::vector<std::vector<float>> want;
  for (std::int64_t i = 0; i < call.n; ++i) want.push_back(call.output(i));
  const Buffer final_q = testing::to_device(Device::cuda, q);
  const std::vector<float> old_q =
      testing::gaussian(static_cast<std::size_t>(q_bytes / 4), seed + 1);

  cudaStream_t raw = nullptr;
  ASSERT_EQ(cudaStreamCreate(&raw), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(raw, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  testing::launch_late_copy(call.q_buffer.data(), final_q.data(), q_bytes, 200, raw);
  call.launch(plan, cache.device_view(), Stream{raw});
  ASSERT_EQ(cudaStreamEndCapture(raw, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    call.q_buffer.copy_from_host(old_q.data(), q_bytes);
    call.out_buffer.fill_bytes(0xFF);
    ASSERT_EQ(cudaGraphLaunch(exec, raw), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(raw), cudaSuccess);
    for (std::int64_t i = 0; i < call.n; ++i) {
      EXPECT_EQ(call.output(i), want[static_cast<std::size_t>(i)])
          << "replay " << replay << " row " << i;
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(raw);
}
#endif

// A small problem per tile family, for compute-sanitizer's slower tools.
TEST(AttentionGpuSanitizer, SmallProblems) {
  SKIP_WITHOUT_GPU();
  const std::vector<testing::DecodeCase> cases = testing::decode_matrix(kKFormats, kVFormats);
  const RowFormat picks[][2] = {{RowFormat::f16, RowFormat::f16},
                                {RowFormat::fp8, RowFormat::tq5},
                                {RowFormat::tq8, RowFormat::tq8},
                                {RowFormat::tq4, RowFormat::fp8}};
  for (const auto& pick : picks) {
    for (const testing::DecodeCase& dc : cases) {
      if (dc.cache.k_format == pick[0] && dc.cache.v_format == pick[1]) {
        check_case(dc, fresh_seed());
        break;
      }
    }
  }
}

}  // namespace
}  // namespace turbodecode
