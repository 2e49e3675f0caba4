// Building blocks of decode attention sharded over ranks (SPEC §2.10): each rank attends over
// its share of the positions and writes (out, lse) (SPEC §2.9); the ranks exchange those
// partial results through a Communicator, and merge_attention combines them (SPEC §2.5).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "turbodecode/attention.h"
#include "turbodecode/tensor.h"

namespace turbodecode {

// Merges R partial attentions over disjoint position sets into the attention over their union.
// parts_out [R, n, n_heads, D] f32 and parts_lse [R, n, n_heads] f32 (part r as run_decode
// wrote it: a part that saw nothing has lse −inf and is skipped, whatever its out holds);
// out [n, n_heads, D] f32; lse (optional: an absent view writes none) [n, n_heads] f32, −inf
// where no part saw anything (out is then zeros). Any strides, innermost dimension of parts_out
// and out contiguous; everything on one device; outputs disjoint from the inputs and from each
// other. Parts are summed in order r = 0..R−1, so results are identical from run to run; on
// CUDA it is one kernel launched on `stream`, which a CUDA graph may capture.
void merge_attention(const TensorView& parts_out, const TensorView& parts_lse,
                     const TensorView& out, const TensorView& lse, Stream stream = {});

// A group of `ranks()` ranks, one Communicator each, that exchange tensors on `device()`.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  virtual Device device() const = 0;

  // Every rank calls this with the same count; afterwards recv[q] holds rank q's send on every
  // rank. send: contiguous f32 [count]; recv: contiguous f32 [ranks(), count], disjoint from
  // send; both on device(). Ordered on `stream` (CUDA; the CPU ignores it and returns when recv
  // is complete).
  void all_gather(const TensorView& send, const TensorView& recv, Stream stream = {});

 protected:
  // all_gather on validated arguments: count = send.shape[0] floats.
  virtual void gather(const float* send, float* recv, std::int64_t count, Stream stream) = 0;
};

// An in-process group of `ranks` ranks on `device` (the CPU, or the current CUDA device), for
// running sharded decode on one machine: rank r is element r, and each rank calls all_gather
// from its own thread (the ranks of a round wait for one another). On CUDA every rank orders the
// exchange on its own stream through events, without blocking the host on the GPU; it cannot
// be captured into a CUDA graph (the NCCL communicator can).
std::vector<std::unique_ptr<Communicator>> local_communicators(int ranks, Device device);

// Bytes of run_sharded_decode's workspace for `plan` over `ranks` ranks.
std::int64_t sharded_decode_workspace_bytes(const DecodePlan& plan, int ranks);

// Decode attention sharded over the ranks of `communicator` (SPEC §2.10): this rank attends over
// its share of every slot's positions (`shard`, see DecodeShard) with lse, the ranks all-gather
// their partial (out, lse), and every rank merges them (merge_attention) into `out` and `lse`
// (optional): the attention over every slot's whole sequence. Every rank passes the same q,
// slot_ids and seq_pos, and arguments as run_decode takes them; workspace u8
// [>= sharded_decode_workspace_bytes(plan, ranks)], 16-byte aligned, zero-filled before its
// first run (run_decode's part of it keeps its completion counters at zero). Everything is
// ordered on `stream`; with the NCCL communicator a CUDA graph may capture the whole of it.
void run_sharded_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                        const TensorView& slot_ids, const TensorView& seq_pos,
                        const DecodeShard& shard, const TensorView& out, const TensorView& lse,
                        const TensorView& workspace, Communicator& communicator,
                        Stream stream = {});

}  // namespace turbodecode
