#include <gtest/gtest.h>

#include "common/thread_pool.h"
#include "turbodecode/buffer.h"
#include "turbodecode/error.h"
#include "turbodecode/tensor.h"

namespace turbodecode {
namespace {

TEST(TensorView, ContiguousStridesAndSlices) {
  float data[2 * 3 * 4] = {};
  auto view = TensorView::contiguous(data, DType::f32, {2, 3, 4});
  EXPECT_EQ(view.strides[0], 12);
  EXPECT_EQ(view.strides[1], 4);
  EXPECT_EQ(view.strides[2], 1);
  EXPECT_EQ(view.numel(), 24);
  EXPECT_TRUE(view.is_contiguous());
  EXPECT_EQ(view.span_bytes(), 96);
  auto middle = view.slice(1, 1, 2);
  EXPECT_EQ(middle.as<float>(), data + 4);
  EXPECT_FALSE(middle.is_contiguous());
  EXPECT_EQ(middle.span_bytes(), (12 + 4 + 3 + 1) * 4);
  EXPECT_THROW(view.slice(1, 2, 2), InvalidArgument);
}

TEST(Buffer, HostRoundTripAndFill) {
  Buffer buffer(Device::cpu, 16);
  const std::uint32_t in[4] = {1, 2, 3, 4};
  buffer.copy_from_host(in, sizeof in);
  buffer.fill_bytes(0xFF);
  std::uint32_t out[4] = {};
  buffer.copy_to_host(out, sizeof out);
  for (auto v : out) EXPECT_EQ(v, 0xFFFFFFFFu);
  EXPECT_THROW(buffer.copy_to_host(out, 32), InvalidArgument);
}

TEST(ParallelFor, CoversEveryIndexOnce) {
  std::vector<int> hits(10007, 0);
  parallel_for(static_cast<std::int64_t>(hits.size()), 16, [&](std::int64_t b, std::int64_t e) {
    for (auto i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
  });
  for (int h : hits) ASSERT_EQ(h, 1);
}

TEST(ParallelFor, PropagatesExceptions) {
  EXPECT_THROW(parallel_for(1000, 1,
                            [](std::int64_t b, std::int64_t) {
                              if (b > 500) throw Error("boom");
                            }),
               Error);
}

}  // namespace
}  // namespace turbodecode
