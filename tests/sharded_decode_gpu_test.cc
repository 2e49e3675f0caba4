// Sharded decode on the CUDA backend (SPEC §2.10): R contiguous shares of every slot's
// positions, decoded with DecodeShard and merged by merge_attention, equal the unsharded decode.
#include <gtest/gtest.h>

#include "decode_cases.h"
#include "sharded_decode_check.h"
#include "test_support.h"

namespace turbodecode {
namespace {

TEST(ShardedDecodeGpu, MergedSharesEqualTheWholeSequence) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible";
  testing::check_shard_matrix(Device::cuda);
}

// A few cases (empty shares, drafts, the merge) for compute-sanitizer's slower tools.
TEST(ShardedDecodeGpuSanitizer, FewCases) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible";
  const auto cases = testing::shard_cases(testing::kKFormats, testing::kVFormats, 3);
  for (std::size_t i = 0; i < cases.size(); i += 9) {
    testing::check_sharded_case(cases[i], Device::cuda, testing::fresh_seed());
  }
}

}  // namespace
}  // namespace turbodecode
