// Sharding building blocks on the CPU backend (SPEC §2.10): merge_attention against the
// double-precision oracle, its argument checks (InvalidArgument naming the argument, nothing
// written), and the in-process communicator's all_gather over several rounds.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "merge_checks.h"
#include "rank_threads.h"
#include "test_support.h"
#include "turbodecode/error.h"
#include "turbodecode/sharded_decode.h"

namespace turbodecode {
namespace {

TEST(ShardedMerge, MatchesOracle) {
  for (const testing::MergeShape& shape : testing::kMergeShapes) {
    testing::check_merge(Device::cpu, shape);
  }
}

TEST(ShardedMerge, EveryPartEmptyGivesZerosAndMinusInfinity) {
  constexpr std::int64_t kParts = 3, kRows = 2, kHeads = 2, kDim = 8;
  std::vector<float> parts_out(kParts * kRows * kHeads * kDim, NAN);
  std::vector<float> parts_lse(kParts * kRows * kHeads, -INFINITY);
  std::vector<float> out(kRows * kHeads * kDim, NAN);
  std::vector<float> lse(kRows * kHeads, NAN);
  merge_attention(
      TensorView::contiguous(parts_out.data(), DType::f32, {kParts, kRows, kHeads, kDim}),
      TensorView::contiguous(parts_lse.data(), DType::f32, {kParts, kRows, kHeads}),
      TensorView::contiguous(out.data(), DType::f32, {kRows, kHeads, kDim}),
      TensorView::contiguous(lse.data(), DType::f32, {kRows, kHeads}));
  for (float v : out) EXPECT_EQ(v, 0.0f);
  for (float v : lse) EXPECT_EQ(v, -INFINITY);
}

// Tensors of a valid merge (R 2, n 3, heads 2, D 4) in one poisoned host allocation, so that
// views can be bent into every rule violation.
class ShardedMergeValidation : public ::testing::Test {
 protected:
  static constexpr std::int64_t kParts = 2, kRows = 3, kHeads = 2, kDim = 4;

  void SetUp() override {
    parts_out_ = testing::gaussian(kParts * kRows * kHeads * kDim, testing::fresh_seed());
    parts_lse_ = testing::gaussian(kParts * kRows * kHeads, testing::fresh_seed());
    outputs_.assign(kRows * kHeads * kDim + kRows * kHeads, NAN);
  }

  TensorView parts_out() { return view(parts_out_.data(), {kParts, kRows, kHeads, kDim}); }
  TensorView parts_lse() { return view(parts_lse_.data(), {kParts, kRows, kHeads}); }
  TensorView out() { return view(outputs_.data(), {kRows, kHeads, kDim}); }
  TensorView lse() { return view(outputs_.data() + kRows * kHeads * kDim, {kRows, kHeads}); }

  static TensorView view(float* data, std::initializer_list<std::int64_t> shape) {
    return TensorView::contiguous(data, DType::f32, shape);
  }

  // Expects `run` to throw InvalidArgument naming `argument`, the outputs still poisoned.
  void expect_rejected(const std::function<void()>& run, const std::string& argument) {
    SCOPED_TRACE("argument " + argument);
    try {
      run();
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
    for (float v : outputs_) ASSERT_TRUE(std::isnan(v)) << "an output was written";
  }

  std::vector<float> parts_out_;
  std::vector<float> parts_lse_;
  std::vector<float> outputs_;  // out, then lse
};

TEST_F(ShardedMergeValidation, ValidArgumentsRun) {
  merge_attention(parts_out(), parts_lse(), out(), lse());
  for (float v : outputs_) EXPECT_FALSE(std::isnan(v));
}

TEST_F(ShardedMergeValidation, RejectsBadShapes) {
  expect_rejected([&] { merge_attention({}, parts_lse(), out(), lse()); }, "parts_out");
  expect_rejected(
      [&] {
        merge_attention(view(parts_out_.data(), {kParts, kRows, kHeads * kDim}), parts_lse(), out(),
                        lse());
      },
      "parts_out");
  expect_rejected([&] { merge_attention(parts_out().slice(0, 0, 0), parts_lse(), out(), lse()); },
                  "parts_out");
  expect_rejected([&] { merge_attention(parts_out(), parts_lse().slice(0, 0, 1), out(), lse()); },
                  "parts_lse");
  expect_rejected([&] { merge_attention(parts_out(), parts_lse(), out().slice(2, 0, 3), lse()); },
                  "out");
  expect_rejected([&] { merge_attention(parts_out(), parts_lse(), out(), lse().slice(1, 0, 1)); },
                  "lse");
}

TEST_F(ShardedMergeValidation, RejectsBadTypesLayoutsAndDevices) {
  TensorView half = out();
  half.dtype = DType::f16;
  expect_rejected([&] { merge_attention(parts_out(), parts_lse(), half, lse()); }, "out");
  TensorView strided = out();
  strided.strides[2] = 2;
  expect_rejected([&] { merge_attention(parts_out(), parts_lse(), strided, lse()); }, "out");
  TensorView elsewhere = lse();
  elsewhere.device = Device::cuda;
  expect_rejected([&] { merge_attention(parts_out(), parts_lse(), out(), elsewhere); }, "lse");
  TensorView lse_i32 = parts_lse();
  lse_i32.dtype = DType::i32;
  expect_rejected([&] { merge_attention(parts_out(), lse_i32, out(), lse()); }, "parts_lse");
}

TEST_F(ShardedMergeValidation, RejectsOverlaps) {
  const TensorView in_place = view(parts_out_.data(), {kRows, kHeads, kDim});
  expect_rejected([&] { merge_attention(parts_out(), parts_lse(), in_place, lse()); }, "out");
  const TensorView lse_over_parts = view(parts_lse_.data(), {kRows, kHeads});
  expect_rejected([&] { merge_attention(parts_out(), parts_lse(), out(), lse_over_parts); }, "lse");
  const TensorView lse_over_out = view(outputs_.data(), {kRows, kHeads});
  expect_rejected([&] { merge_attention(parts_out(), parts_lse(), out(), lse_over_out); }, "lse");
}

// Rank r's send in round k: fresh values, different for every rank and round.
std::vector<float> send_values(std::uint64_t seed, int round, int rank, std::int64_t count) {
  return testing::gaussian(static_cast<std::size_t>(count),
                           seed + static_cast<std::uint64_t>(round * 1000 + rank));
}

TEST(LocalCommunicator, AllGatherDeliversEveryRankInRankOrder) {
  constexpr int kRounds = 4;
  for (int ranks : {1, 2, 3, 5}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", ranks " + std::to_string(ranks));
    const auto communicators = local_communicators(ranks, Device::cpu);
    ASSERT_EQ(communicators.size(), static_cast<std::size_t>(ranks));
    for (int round = 0; round < kRounds; ++round) {
      const std::int64_t count = 1 + 37 * round;
      std::vector<std::vector<float>> received(static_cast<std::size_t>(ranks));
      testing::run_ranks(ranks, [&](int r) {
        Communicator& communicator = *communicators[static_cast<std::size_t>(r)];
        EXPECT_EQ(communicator.rank(), r);
        EXPECT_EQ(communicator.ranks(), ranks);
        std::vector<float> send = send_values(seed, round, r, count);
        std::vector<float>& recv = received[static_cast<std::size_t>(r)];
        recv.assign(static_cast<std::size_t>(ranks * count), NAN);
        communicator.all_gather(TensorView::contiguous(send.data(), DType::f32, {count}),
                                TensorView::contiguous(recv.data(), DType::f32, {ranks, count}));
      });
      for (int r = 0; r < ranks; ++r) {
        for (int q = 0; q < ranks; ++q) {
          const std::vector<float> want = send_values(seed, round, q, count);
          const auto got = received[static_cast<std::size_t>(r)].begin() + q * count;
          ASSERT_TRUE(std::equal(want.begin(), want.end(), got))
              << "round " << round << ": rank " << r << " got a wrong recv[" << q << "]";
        }
      }
    }
  }
}

TEST(LocalCommunicator, RejectsBadArguments) {
  EXPECT_THROW(local_communicators(0, Device::cpu), InvalidArgument);
  const auto communicators = local_communicators(2, Device::cpu);
  Communicator& first = *communicators[0];
  std::vector<float> data(16, 1.0f);
  const TensorView send = TensorView::contiguous(data.data(), DType::f32, {4});
  const TensorView recv = TensorView::contiguous(data.data() + 8, DType::f32, {2, 4});
  auto rejected_argument = [&](const TensorView& s, const TensorView& r) -> std::string {
    try {
      first.all_gather(s, r);
    } catch (const InvalidArgument& e) {
      return e.argument();
    }
    return "(accepted)";
  };
  EXPECT_EQ(rejected_argument(send, TensorView::contiguous(data.data() + 8, DType::f32, {3, 4})),
            "recv");
  EXPECT_EQ(rejected_argument(send, TensorView::contiguous(data.data() + 2, DType::f32, {2, 4})),
            "recv");
  EXPECT_EQ(rejected_argument(send.slice(0, 0, 0), recv), "send");
  TensorView strided = TensorView::contiguous(data.data(), DType::f32, {4});
  strided.strides[0] = 2;
  EXPECT_EQ(rejected_argument(strided, recv), "send");
}

TEST(LocalCommunicator, CountMismatchFailsOnEveryRankAndTheGroupRecovers) {
  const auto communicators = local_communicators(2, Device::cpu);
  std::vector<std::string> errors(2);
  testing::run_ranks(2, [&](int r) {
    const std::int64_t count = 2 + r;
    std::vector<float> send(static_cast<std::size_t>(count), 1.0f);
    std::vector<float> recv(static_cast<std::size_t>(2 * count), NAN);
    try {
      communicators[static_cast<std::size_t>(r)]->all_gather(
          TensorView::contiguous(send.data(), DType::f32, {count}),
          TensorView::contiguous(recv.data(), DType::f32, {2, count}));
    } catch (const InvalidArgument& e) {
      errors[static_cast<std::size_t>(r)] = e.argument();
    }
    for (float v : recv) EXPECT_TRUE(std::isnan(v)) << "rank " << r << " received something";
  });
  EXPECT_EQ(errors[0], "send");
  EXPECT_EQ(errors[1], "send");
  std::vector<std::vector<float>> received(2, std::vector<float>(2, NAN));
  testing::run_ranks(2, [&](int r) {
    float value = static_cast<float>(r + 1);
    communicators[static_cast<std::size_t>(r)]->all_gather(
        TensorView::contiguous(&value, DType::f32, {1}),
        TensorView::contiguous(received[static_cast<std::size_t>(r)].data(), DType::f32, {2, 1}));
  });
  for (const auto& recv : received) EXPECT_EQ(recv, (std::vector<float>{1.0f, 2.0f}));
}

}  // namespace
}  // namespace turbodecode
