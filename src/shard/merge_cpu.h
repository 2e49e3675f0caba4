// CPU backend of merge_attention.
#pragma once

#include "shard/merge_args.h"

namespace turbodecode::shard {

void merge_cpu(const MergeArgs& args);

}  // namespace turbodecode::shard
