// Sharded decode on the CPU backend (SPEC §2.10): R contiguous shares of every slot's positions,
// decoded with DecodeShard and merged by merge_attention, equal the unsharded decode.
#include <gtest/gtest.h>

#include "sharded_decode_check.h"

namespace turbodecode {
namespace {

TEST(ShardedDecode, MergedSharesEqualTheWholeSequence) {
  testing::check_shard_matrix(Device::cpu);
}

}  // namespace
}  // namespace turbodecode
