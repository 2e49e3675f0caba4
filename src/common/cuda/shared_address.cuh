// The 32-bit shared-memory address of a generic pointer into shared memory: the operand form of
// the PTX instructions that name shared memory (cp.async, mbarrier, ld.shared).
#pragma once

namespace turbodecode::cuda {

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

}  // namespace turbodecode::cuda
