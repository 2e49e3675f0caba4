// Sharding building blocks on the CUDA backend (SPEC §2.10): merge_attention against the
// double-precision oracle (NaN-poisoned outputs, empty parts whose NaN must not leak, bitwise
// repeatable), and the in-process communicator with every rank on its own thread and stream.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "merge_checks.h"
#include "rank_threads.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/sharded_decode.h"

#ifdef TURBODECODE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace turbodecode {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible"

TEST(ShardedMergeGpu, MatchesOracle) {
  SKIP_WITHOUT_GPU();
  for (const testing::MergeShape& shape : testing::kMergeShapes) {
    testing::check_merge(Device::cuda, shape);
  }
}

#ifdef TURBODECODE_WITH_CUDA

// A stream of the calling thread's own, destroyed with it.
struct OwnStream {
  OwnStream() { EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess); }
  ~OwnStream() { cudaStreamDestroy(stream); }
  Stream handle() const { return Stream{stream}; }
  cudaStream_t stream = nullptr;
};

TEST(LocalCommunicatorGpu, AllGatherOrdersEveryRankOnItsOwnStream) {
  SKIP_WITHOUT_GPU();
  constexpr int kRounds = 4;
  for (int ranks : {1, 2, 3, 5}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", ranks " + std::to_string(ranks));
    const auto communicators = local_communicators(ranks, Device::cuda);
    std::vector<std::vector<float>> received(static_cast<std::size_t>(ranks));
    std::vector<std::vector<float>> sent(static_cast<std::size_t>(ranks));
    for (int round = 0; round < kRounds; ++round) {
      const std::int64_t count = 1 + 4099 * round;
      const std::int64_t bytes = count * std::int64_t{sizeof(float)};
      testing::run_ranks(ranks, [&](int r) {
        const OwnStream stream;
        const auto rank = static_cast<std::size_t>(r);
        sent[rank] = testing::gaussian(static_cast<std::size_t>(count),
                                       seed + static_cast<std::uint64_t>(round * 1000 + r));
        Buffer send(Device::cuda, bytes);
        Buffer recv(Device::cuda, ranks * bytes);
        // The send is written, and later overwritten, on the rank's stream only: all_gather
        // must order the other ranks' copies between the two.
        ASSERT_EQ(
            cudaMemsetAsync(recv.data(), 0xFF, static_cast<size_t>(ranks * bytes), stream.stream),
            cudaSuccess);
        ASSERT_EQ(cudaMemcpyAsync(send.data(), sent[rank].data(), static_cast<size_t>(bytes),
                                  cudaMemcpyHostToDevice, stream.stream),
                  cudaSuccess);
        communicators[rank]->all_gather(send.view(DType::f32, {count}),
                                        recv.view(DType::f32, {ranks, count}), stream.handle());
        ASSERT_EQ(cudaMemsetAsync(send.data(), 0, static_cast<size_t>(bytes), stream.stream),
                  cudaSuccess);
        synchronize(stream.handle());
        received[rank] = testing::to_host<float>(recv);
      });
      for (int r = 0; r < ranks; ++r) {
        for (int q = 0; q < ranks; ++q) {
          const std::vector<float>& want = sent[static_cast<std::size_t>(q)];
          const auto got = received[static_cast<std::size_t>(r)].begin() + q * count;
          ASSERT_TRUE(std::equal(want.begin(), want.end(), got))
              << "round " << round << ": rank " << r << " got a wrong recv[" << q << "]";
        }
      }
    }
  }
}

#endif  // TURBODECODE_WITH_CUDA

}  // namespace
}  // namespace turbodecode
