// The NCCL communicator (turbodecode_nccl): all_gather on one rank, and on every visible GPU
// when there are two or more, each rank on its own thread and stream. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "rank_threads.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/error.h"
#include "turbodecode/kv_cache.h"
#include "turbodecode/nccl_communicator.h"

namespace turbodecode {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible"

// Rank `rank`'s all_gather of fresh values on a stream of its own; returns its recv.
std::vector<float> gather_on_own_stream(Communicator& communicator, std::uint64_t seed,
                                        std::int64_t count) {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const std::int64_t ranks = communicator.ranks();
  const Buffer send = testing::to_device(
      Device::cuda, testing::gaussian(static_cast<std::size_t>(count), seed + communicator.rank()));
  Buffer recv(Device::cuda, ranks * count * std::int64_t{sizeof(float)});
  recv.fill_bytes(0xFF);
  communicator.all_gather(send.view(DType::f32, {count}), recv.view(DType::f32, {ranks, count}),
                          Stream{stream});
  synchronize(Stream{stream});
  cudaStreamDestroy(stream);
  return testing::to_host<float>(recv);
}

void expect_rank_order(const std::vector<float>& recv, std::uint64_t seed, int ranks,
                       std::int64_t count) {
  for (int q = 0; q < ranks; ++q) {
    const std::vector<float> want = testing::gaussian(static_cast<std::size_t>(count), seed + q);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), recv.begin() + q * count))
        << "recv[" << q << "] is not rank " << q << "'s send";
  }
}

TEST(NcclCommunicator, OneRankGathersItself) {
  SKIP_WITHOUT_GPU();
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto communicator = nccl_communicator(nccl_unique_id(), 0, 1);
  EXPECT_EQ(communicator->rank(), 0);
  EXPECT_EQ(communicator->ranks(), 1);
  EXPECT_EQ(communicator->device(), Device::cuda);
  expect_rank_order(gather_on_own_stream(*communicator, seed, 1000), seed, 1, 1000);
}

TEST(NcclCommunicator, RejectsBadRanks) {
  EXPECT_THROW(nccl_communicator(NcclId{}, 1, 1), InvalidArgument);
  EXPECT_THROW(nccl_communicator(NcclId{}, 0, 0), InvalidArgument);
  EXPECT_THROW(nccl_communicators_all_devices(0), InvalidArgument);
}

TEST(NcclCommunicator, EveryDeviceGathersInRankOrder) {
  SKIP_WITHOUT_GPU();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < 2) GTEST_SKIP() << "needs two CUDA devices, sees " << devices;
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + ", ranks " + std::to_string(devices));
  const auto communicators = nccl_communicators_all_devices(devices);
  constexpr std::int64_t kCount = 4099;
  std::vector<std::vector<float>> received(static_cast<std::size_t>(devices));
  testing::run_ranks(devices, [&](int r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    received[static_cast<std::size_t>(r)] =
        gather_on_own_stream(*communicators[static_cast<std::size_t>(r)], seed, kCount);
  });
  for (int r = 0; r < devices; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    expect_rank_order(received[static_cast<std::size_t>(r)], seed, devices, kCount);
  }
}

// run_sharded_decode over a one-rank NCCL group, captured once into a CUDA graph and replayed
// as the positions and the shard ranges change in device memory: each replay equals the eager
// run of the same values bitwise.
TEST(NcclCommunicator, ShardedDecodeReplaysInAGraph) {
  SKIP_WITHOUT_GPU();
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const KvCacheConfig config{.slots = 2,
                             .n_kv_heads = 2,
                             .capacity = 600,
                             .head_dim = 256,
                             .k_format = RowFormat::f16,
                             .v_format = RowFormat::tq8,
                             .device = Device::cuda};
  KvCache cache(config);
  constexpr std::int64_t kTokens = 600, kHeads = 4, kDim = 256;
  const std::int64_t row = config.n_kv_heads * kDim;
  for (std::int32_t slot = 0; slot < 2; ++slot) {
    std::vector<std::int32_t> slots(kTokens, slot), positions(kTokens);
    for (std::int32_t p = 0; p < kTokens; ++p) positions[p] = p;
    const Buffer k =
        testing::to_device(Device::cuda, testing::gaussian(kTokens * row, seed + slot));
    const Buffer v =
        testing::to_device(Device::cuda, testing::gaussian(kTokens * row, ~seed + slot));
    const Buffer s = testing::to_device(Device::cuda, slots);
    const Buffer p = testing::to_device(Device::cuda, positions);
    append_kv(cache.view(), k.view(DType::f32, {kTokens, 2, kDim}),
              v.view(DType::f32, {kTokens, 2, kDim}), s.view(DType::i32, {kTokens}),
              p.view(DType::i32, {kTokens}));
  }
  const DecodePlan plan = plan_decode(config, {.n_heads = kHeads}, 2);
  const auto communicator = nccl_communicator(nccl_unique_id(), 0, 1);
  const Buffer q = testing::to_device(Device::cuda, testing::gaussian(2 * kHeads * kDim, seed - 1));
  const Buffer slot_ids = testing::to_device(Device::cuda, std::vector<std::int32_t>{1, 0});
  Buffer seq_pos(Device::cuda, 8), begin(Device::cuda, 8), end(Device::cuda, 8);
  Buffer out(Device::cuda, 2 * kHeads * kDim * 4), lse(Device::cuda, 2 * kHeads * 4);
  Buffer workspace(Device::cuda, sharded_decode_workspace_bytes(plan, 1));
  workspace.fill_bytes(0);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const auto step = [&] {
    run_sharded_decode(
        plan, cache.view(), q.view(DType::f32, {2, kHeads, kDim}), slot_ids.view(DType::i32, {2}),
        seq_pos.view(DType::i32, {2}), {begin.view(DType::i32, {2}), end.view(DType::i32, {2})},
        out.view(DType::f32, {2, kHeads, kDim}), lse.view(DType::f32, {2, kHeads}),
        workspace.view(DType::u8, {workspace.bytes()}), *communicator, Stream{stream});
  };
  // (positions, begins, ends): the shard holds positions [begin, end) at rows from 0.
  const std::vector<std::array<std::vector<std::int32_t>, 3>> steps = {
      {{{{599, 100}}, {{0, 0}}, {{INT32_MAX, INT32_MAX}}}},
      {{{{400, 599}}, {{100, 0}}, {{500, 300}}}},
      {{{{599, 599}}, {{0, 50}}, {{599, INT32_MAX}}}}};
  const auto set = [&](const std::array<std::vector<std::int32_t>, 3>& values) {
    seq_pos.copy_from_host(values[0].data(), 8);
    begin.copy_from_host(values[1].data(), 8);
    end.copy_from_host(values[2].data(), 8);
  };
  set(steps[0]);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  step();
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (const auto& values : steps) {
    set(values);
    out.fill_bytes(0xFF);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<std::uint32_t> replayed = testing::to_host<std::uint32_t>(out);
    out.fill_bytes(0xFF);
    step();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(replayed, testing::to_host<std::uint32_t>(out)) << "positions " << values[0][0];
    EXPECT_FALSE(std::isnan(testing::to_host<float>(out)[0]));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace turbodecode
