// The split kernel instances and how to pick one. Their definitions (split_kernel.cuh) are
// instantiated once, in split_instances_k_*.cu, so the instances build in parallel and the
// dispatch compiles no kernel itself.
#pragma once

#include <cuda_runtime.h>

#include "attention/cuda/decode_params.cuh"

namespace turbodecode::cuda::decode {

// One instance of the split kernel: the entry of its one-split kernel (for occupancy queries;
// the several-splits kernel has the same launch bounds and shared memory), its dynamic shared
// memory, and its launcher, which picks one of the two from the grid.
struct SplitKernel {
  const void* function;
  int shared_bytes;
  void (*launch)(const DecodeParams& p, dim3 grid, cudaStream_t stream);
};

template <int D, int kHeads, RowCodec KC, RowCodec VC>
SplitKernel split_kernel_for();

// The instance for a head dim, heads per block (heads_per_block) and K and V codecs: the one
// dispatch switch. Defined in split_dispatch.cu.
SplitKernel select_split_kernel(int head_dim, int heads, RowCodec k, RowCodec v);

// Instantiates (or declares, with `extern`) the instances of one K codec for every head dim,
// heads per block and V codec the dispatch can pick.
#define TD_SPLIT_INSTANCES_FOR_V(PREFIX, D, H, KC)                             \
  PREFIX template SplitKernel split_kernel_for<D, H, KC, RowCodec::f16>();     \
  PREFIX template SplitKernel split_kernel_for<D, H, KC, RowCodec::tq_byte>(); \
  PREFIX template SplitKernel split_kernel_for<D, H, KC, RowCodec::tq_nibble>();
#define TD_SPLIT_INSTANCES_FOR_HEADS(PREFIX, D, KC) \
  TD_SPLIT_INSTANCES_FOR_V(PREFIX, D, 1, KC)        \
  TD_SPLIT_INSTANCES_FOR_V(PREFIX, D, 2, KC)        \
  TD_SPLIT_INSTANCES_FOR_V(PREFIX, D, 4, KC)        \
  TD_SPLIT_INSTANCES_FOR_V(PREFIX, D, 8, KC)
#define TD_SPLIT_INSTANCES(PREFIX, KC)          \
  TD_SPLIT_INSTANCES_FOR_HEADS(PREFIX, 256, KC) \
  TD_SPLIT_INSTANCES_FOR_HEADS(PREFIX, 512, KC)

TD_SPLIT_INSTANCES(extern, RowCodec::f16)
TD_SPLIT_INSTANCES(extern, RowCodec::tq_byte)
TD_SPLIT_INSTANCES(extern, RowCodec::tq_nibble)

}  // namespace turbodecode::cuda::decode
