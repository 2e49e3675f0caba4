// Sharded decode on the CPU backend (SPEC §2.10): R contiguous shares of every slot's positions,
// decoded with DecodeShard and merged by merge_attention, equal the unsharded decode.
#include <gtest/gtest.h>

#include "decode_cases.h"
#include "sharded_decode_check.h"

namespace turbodecode {
namespace {

TEST(ShardedDecode, MergedSharesEqualTheWholeSequence) {
  for (int ranks : {2, 3}) {
    for (const testing::ShardCase& c :
         testing::shard_cases(testing::kKFormats, testing::kVFormats, ranks)) {
      const std::uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed) + " ranks " + std::to_string(ranks));
      testing::check_sharded_case(c, Device::cpu, seed);
    }
  }
}

}  // namespace
}  // namespace turbodecode
