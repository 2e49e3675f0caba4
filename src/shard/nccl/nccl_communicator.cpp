// Communicator over NCCL: all_gather is one ncclAllGather on the caller's stream, so a CUDA
// graph may capture it.
#include "turbodecode/nccl_communicator.h"

#include <nccl.h>

#include <cstring>
#include <string>

#include "common/cuda_runtime.h"
#include "common/validate.h"
#include "turbodecode/error.h"

namespace turbodecode {
namespace {

static_assert(sizeof(NcclId::bytes) == sizeof(ncclUniqueId));

void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess) {
    throw Error(std::string("NCCL call ") + call + " failed (" +
                std::to_string(static_cast<int>(status)) + "): " + ncclGetErrorString(status));
  }
}

#define TD_NCCL_CHECK(call) check_nccl((call), #call)

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(ncclComm_t comm) : comm_(comm) {
    TD_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
    TD_NCCL_CHECK(ncclCommCount(comm_, &ranks_));
  }
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  Device device() const override { return Device::cuda; }

 protected:
  void gather(const float* send, float* recv, std::int64_t count, Stream stream) override {
    TD_NCCL_CHECK(ncclAllGather(send, recv, static_cast<size_t>(count), ncclFloat, comm_,
                                static_cast<cudaStream_t>(stream.handle)));
  }

 private:
  ncclComm_t comm_;
  int rank_ = 0;
  int ranks_ = 0;
};

}  // namespace

NcclId nccl_unique_id() {
  ncclUniqueId unique_id;
  TD_NCCL_CHECK(ncclGetUniqueId(&unique_id));
  NcclId id;
  std::memcpy(id.bytes.data(), unique_id.internal, id.bytes.size());
  return id;
}

std::unique_ptr<Communicator> nccl_communicator(const NcclId& id, int rank, int ranks) {
  check_arg(ranks >= 1, "ranks", "must be positive, is " + std::to_string(ranks));
  check_arg(rank >= 0 && rank < ranks, "rank",
            "must be in [0, ranks = " + std::to_string(ranks) + "), is " + std::to_string(rank));
  ncclUniqueId unique_id;
  std::memcpy(unique_id.internal, id.bytes.data(), id.bytes.size());
  ncclComm_t comm = nullptr;
  TD_NCCL_CHECK(ncclCommInitRank(&comm, ranks, unique_id, rank));
  return std::make_unique<NcclCommunicator>(comm);
}

std::vector<std::unique_ptr<Communicator>> nccl_communicators_all_devices(int ranks) {
  const int devices = cuda::device_count();
  check_arg(ranks >= 1 && ranks <= devices, "ranks",
            "must be in [1, visible CUDA devices = " + std::to_string(devices) + "], is " +
                std::to_string(ranks));
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks));
  TD_NCCL_CHECK(ncclCommInitAll(comms.data(), ranks, nullptr));
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (ncclComm_t comm : comms) communicators.push_back(std::make_unique<NcclCommunicator>(comm));
  return communicators;
}

}  // namespace turbodecode
