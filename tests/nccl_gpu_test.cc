// The NCCL communicator (turbodecode_nccl): all_gather on one rank, and on every visible GPU
// when there are two or more, each rank on its own thread and stream. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "rank_threads.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/error.h"
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

}  // namespace
}  // namespace turbodecode
