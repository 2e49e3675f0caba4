// Asynchronous global->shared copies (cp.async, sm_80+), shared by the kernels that stream
// through shared-memory pipelines (decode attention, the tensor-core Q8_0 matvec).
#pragma once

#include <cstdint>

#include "common/cuda/shared_address.cuh"

namespace turbodecode::cuda {

// The first `source_bytes` (0 … 16) of 16 global bytes, bypassing L1 (streamed once); the
// rest of the 16 destination bytes is zero-filled.
__device__ __forceinline__ void copy_async_16(void* shared, const void* global, int source_bytes) {
  const unsigned address = shared_address(shared);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
               "r"(source_bytes)
               : "memory");
}

// 4 global bytes, or 4 zero bytes when !valid.
__device__ __forceinline__ void copy_async_4(void* shared, const void* global, bool valid) {
  const unsigned address = shared_address(shared);
  const int source_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(global),
               "r"(source_bytes)
               : "memory");
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) by the tensor memory accelerator
// in one instruction (cp.async.bulk, sm_90+), counted as transaction bytes against `barrier`
// (mbarrier_expect_bytes).
__device__ __forceinline__ void copy_bulk(void* shared, const void* global, unsigned bytes,
                                          std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
      ::"r"(shared_address(shared)), "l"(global), "r"(bytes), "r"(shared_address(barrier))
      : "memory");
}

__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most `kPending` of this thread's committed copy groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace turbodecode::cuda
