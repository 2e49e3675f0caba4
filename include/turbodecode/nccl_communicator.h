// Communicators over NCCL, for sharded decode across GPUs (SPEC §2.10). They live in the
// library turbodecode_nccl, apart from `turbodecode`, so that only programs that link it need
// libnccl at run time; it is built when CMake finds NCCL (TURBODECODE_WITH_NCCL).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "turbodecode/sharded_decode.h"

namespace turbodecode {

// Names one NCCL group: made once by one process and handed to every rank (an ncclUniqueId).
struct NcclId {
  std::array<char, 128> bytes{};
};

NcclId nccl_unique_id();

// Rank `rank` of a group of `ranks` on the current CUDA device. Returns once every rank of the
// group has joined, so the ranks of one process join from threads of their own.
std::unique_ptr<Communicator> nccl_communicator(const NcclId& id, int rank, int ranks);

// A group whose rank r runs on CUDA device r, for r < ranks <= the number of visible devices,
// all in this process. Each rank's all_gather runs from a thread of its own, on a stream of
// its own device (NCCL waits for every rank of a collective to join it).
std::vector<std::unique_ptr<Communicator>> nccl_communicators_all_devices(int ranks);

}  // namespace turbodecode
