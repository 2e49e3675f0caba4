// The decode kernel's instances and how to pick one. Their definitions (decode_kernel.cuh) are
// instantiated once, in instances/*.cu, so they build in parallel and the dispatch compiles
// no kernel itself.
#pragma once

#include <cuda_runtime.h>

#include "attention/cuda/decode_params.cuh"
#include "turbodecode/tq_codec.h"

namespace turbodecode::cuda::decode {

// One instance: its entry (for occupancy queries), dynamic shared memory and launcher.
struct DecodeKernel {
  const void* function;
  int shared_bytes;
  void (*launch)(const DecodeParams& p, cudaStream_t stream);
};

template <int D, int kColumns, RowFormat KF, RowFormat VF>
DecodeKernel decode_kernel_for();

// Query columns per block for a run's columns (query_tokens × GQA group): 2 for up to two,
// else 8; more than 8 take several blocks of 8.
int columns_per_block(int run_columns);

// The instance for a head dim, columns per block and K and V formats: the one dispatch switch.
// K formats: f16, fp8, tq4, tq8; V formats: all. Defined in decode_dispatch.cu.
DecodeKernel select_decode_kernel(int head_dim, int columns, RowFormat k, RowFormat v);

// Instantiates (or declares, with `extern`) the instances of one K format and head dim for
// every column count and V format the dispatch can pick.
#define TD_DECODE_INSTANCES_FOR_V(PREFIX, D, C, KF)                           \
  PREFIX template DecodeKernel decode_kernel_for<D, C, KF, RowFormat::f16>(); \
  PREFIX template DecodeKernel decode_kernel_for<D, C, KF, RowFormat::fp8>(); \
  PREFIX template DecodeKernel decode_kernel_for<D, C, KF, RowFormat::tq3>(); \
  PREFIX template DecodeKernel decode_kernel_for<D, C, KF, RowFormat::tq4>(); \
  PREFIX template DecodeKernel decode_kernel_for<D, C, KF, RowFormat::tq5>(); \
  PREFIX template DecodeKernel decode_kernel_for<D, C, KF, RowFormat::tq6>(); \
  PREFIX template DecodeKernel decode_kernel_for<D, C, KF, RowFormat::tq8>();
#define TD_DECODE_INSTANCES(PREFIX, D, KF)     \
  TD_DECODE_INSTANCES_FOR_V(PREFIX, D, 2, KF) \
  TD_DECODE_INSTANCES_FOR_V(PREFIX, D, 8, KF)

TD_DECODE_INSTANCES(extern, 256, RowFormat::f16)
TD_DECODE_INSTANCES(extern, 512, RowFormat::f16)
TD_DECODE_INSTANCES(extern, 256, RowFormat::fp8)
TD_DECODE_INSTANCES(extern, 512, RowFormat::fp8)
TD_DECODE_INSTANCES(extern, 256, RowFormat::tq4)
TD_DECODE_INSTANCES(extern, 512, RowFormat::tq4)
TD_DECODE_INSTANCES(extern, 256, RowFormat::tq8)
TD_DECODE_INSTANCES(extern, 512, RowFormat::tq8)

}  // namespace turbodecode::cuda::decode
