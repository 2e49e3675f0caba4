// Barriers for warp-specialised pipelines, whose shared-memory stages one warp fills and the
// others consume. Transaction barriers (mbarrier, sm_80+): a stage's "full" barrier completes a
// phase when its copies have landed, its "empty" barrier when every consumer has released it;
// a waiter names the phase by its parity, so a barrier may run at most one phase ahead of any
// waiter. Named barriers: block barriers among the consumer warps alone.
#pragma once

#include <cstdint>

#include "common/cuda/shared_address.cuh"

namespace turbodecode::cuda {

// Sets the arrivals each phase expects. Other threads may use the barrier only after a block
// barrier that follows this.
__device__ __forceinline__ void mbarrier_init(std::uint64_t* barrier, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)),
               "r"(arrivals)
               : "memory");
}

// One arrival of the calling thread (release: its earlier shared-memory accesses happen
// before the phase completes).
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier))
               : "memory");
}

// One arrival of the calling thread once all of its earlier cp.async copies have landed
// (counted against the barrier's expected arrivals: .noinc).
__device__ __forceinline__ void mbarrier_arrive_after_copies(std::uint64_t* barrier) {
  asm volatile(
      "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(shared_address(barrier))
      : "memory");
}

// Adds `bytes` to the transaction bytes the current phase waits for (bulk copies complete
// them, copy_bulk), without arriving; before any of those copies is issued.
__device__ __forceinline__ void mbarrier_expect_bytes(std::uint64_t* barrier, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(
                   shared_address(barrier)),
               "r"(bytes)
               : "memory");
}

// Waits (acquire) until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* barrier, unsigned parity) {
  const unsigned address = shared_address(barrier);
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(address), "r"(parity)
        : "memory");
  }
}

// Barrier among the first `kThreads` threads of the block (whole warps) on hardware barrier
// `kId` (1…15; __syncthreads uses 0), for when other warps of the block go their own way.
template <int kId, int kThreads>
__device__ __forceinline__ void named_barrier_sync() {
  static_assert(kId > 0 && kId < 16 && kThreads % 32 == 0, "a named barrier of whole warps");
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kThreads) : "memory");
}

}  // namespace turbodecode::cuda
