// The in-process group of local_communicators: its ranks are threads of one process that meet
// at a barrier twice per all_gather (after publishing their send buffers, after copying).
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/validate.h"
#include "turbodecode/sharded_decode.h"

#ifdef TURBODECODE_WITH_CUDA
#include "shard/cuda/shard_cuda.h"
#endif

namespace turbodecode {
namespace {

// Far beyond any machine's thread count: every rank is a thread of this process.
constexpr int kMaxLocalRanks = 1024;

// What the ranks share. A rank writes only its own slots, before the first barrier of a round;
// the others read them between the two barriers, so no slot changes while it is read.
struct LocalGroup {
  LocalGroup(int ranks, Device group_device)
      : device(group_device),
        phase(ranks),
        sends(static_cast<std::size_t>(ranks)),
        counts(static_cast<std::size_t>(ranks)) {
#ifdef TURBODECODE_WITH_CUDA
    if (device == Device::cuda) {
      ready.resize(static_cast<std::size_t>(ranks));
      copied.resize(static_cast<std::size_t>(ranks));
    }
#endif
  }

  Device device;
  std::barrier<> phase;
  std::vector<const float*> sends;
  std::vector<std::int64_t> counts;
#ifdef TURBODECODE_WITH_CUDA
  // ready[r]: rank r's send is written; copied[r]: rank r has read every send.
  std::vector<cuda::Event> ready;
  std::vector<cuda::Event> copied;
#endif
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int ranks() const override { return static_cast<int>(group_->sends.size()); }
  Device device() const override { return group_->device; }

 protected:
  void gather(const float* send, float* recv, std::int64_t count, Stream stream) override {
    LocalGroup& group = *group_;
    group.sends[rank_] = send;
    group.counts[rank_] = count;
#ifdef TURBODECODE_WITH_CUDA
    if (group.device == Device::cuda) group.ready[rank_].record(stream);
#endif
    group.phase.arrive_and_wait();
    // Every rank sees the same counts, so on a mismatch all of them copy nothing and throw.
    const bool same_count = std::ranges::all_of(group.counts, [&](auto c) { return c == count; });
    if (same_count) copy_sends(recv, count, stream);
    group.phase.arrive_and_wait();
    check_arg(same_count, "send", "must hold the same number of floats on every rank");
#ifdef TURBODECODE_WITH_CUDA
    // The caller may overwrite its send on its stream next: only after every rank copied it.
    if (group.device == Device::cuda) {
      for (int q = 0; q < ranks(); ++q) {
        if (q != rank_) group.copied[q].order_before(stream);
      }
    }
#endif
  }

 private:
  void copy_sends(float* recv, std::int64_t count, [[maybe_unused]] Stream stream) {
    LocalGroup& group = *group_;
    for (int q = 0; q < ranks(); ++q) {
      float* dst = recv + q * count;
      if (group.device == Device::cpu) {
        std::copy_n(group.sends[q], count, dst);
        continue;
      }
#ifdef TURBODECODE_WITH_CUDA
      if (q != rank_) group.ready[q].order_before(stream);
      cuda::copy_device_async(dst, group.sends[q], count * std::int64_t{sizeof(float)}, stream);
#endif
    }
#ifdef TURBODECODE_WITH_CUDA
    if (group.device == Device::cuda) group.copied[rank_].record(stream);
#endif
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> local_communicators(int ranks, Device device) {
  check_arg(ranks >= 1 && ranks <= kMaxLocalRanks, "ranks",
            "must be in [1, " + std::to_string(kMaxLocalRanks) + "], is " + std::to_string(ranks));
  check_backend(device);
  auto group = std::make_shared<LocalGroup>(ranks, device);
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (int r = 0; r < ranks; ++r) {
    communicators.push_back(std::make_unique<LocalCommunicator>(group, r));
  }
  return communicators;
}

}  // namespace turbodecode
