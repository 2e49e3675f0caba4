// Measurement tools of the GPU benchmarks (SPEC §6): the card's read-stream and copy bandwidth,
// CUDA-event timing of eager launches and of CUDA-graph replays (medians), and random device
// data. Included by bench/*_bench.cu drivers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dependent_launch.cuh"
#include "turbodecode/tensor.h"

namespace turbodecode::bench {

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// ---- Random device data: a hash of (index, seed) mapped to [-1, 1). ----

__device__ __forceinline__ unsigned mix_bits(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<unsigned>(x);
}

__device__ __forceinline__ void store_as(float value, float* out) {
  *out = value;
}
__device__ __forceinline__ void store_as(float value, __half* out) {
  *out = __float2half_rn(value);
}
__device__ __forceinline__ void store_as(float value, __nv_bfloat16* out) {
  *out = __float2bfloat16_rn(value);
}

template <class T>
__global__ void fill_uniform_kernel(T* out, std::int64_t n, unsigned long long seed) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    const unsigned bits =
        mix_bits(static_cast<unsigned long long>(i) * 0x9e3779b97f4a7c15ull ^ seed);
    store_as(static_cast<float>(bits) * (2.0f / 4294967296.0f) - 1.0f, out + i);
  }
}

// n values of `dtype` (f32, f16 or bf16) at `out`, uniform in [-1, 1).
inline void fill_uniform(void* out, DType dtype, std::int64_t n, unsigned long long seed,
                         cudaStream_t s) {
  constexpr int kBlocks = 1024, kThreads = 256;
  if (dtype == DType::f16) {
    fill_uniform_kernel<<<kBlocks, kThreads, 0, s>>>(static_cast<__half*>(out), n, seed);
  } else if (dtype == DType::bf16) {
    fill_uniform_kernel<<<kBlocks, kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(out), n, seed);
  } else {
    fill_uniform_kernel<<<kBlocks, kThreads, 0, s>>>(static_cast<float*>(out), n, seed);
  }
  TD_CUDA_CHECK_LAUNCH("fill_uniform_kernel");
}

// ---- Bandwidth ceilings. ----

// Each thread keeps kLoadsInFlight independent 16-byte loads outstanding; the xor of all data
// goes to one word per block so nothing is optimised away.
inline constexpr int kLoadsInFlight = 4;
inline constexpr int kReadStreamThreads = 512;  // threads per block of the bandwidth kernels

// Blocks of the bandwidth kernels' grid: four per SM.
inline int read_stream_blocks(int sm_count) {
  return 4 * sm_count;
}

// The xor of this thread's share of `vectors` 16-byte words at `data`, the grid's threads taking
// them in turn, kLoadsInFlight loads outstanding. The last round's loads are predicated rather
// than issued one after another, so that a buffer of a few passes (the hc_bench row for the
// Q8_0 weights) has all its loads in flight.
__device__ __forceinline__ unsigned stream_xor(const uint4* data, std::int64_t vectors) {
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (std::int64_t i = first; i < vectors; i += kLoadsInFlight * threads) {
    uint4 v[kLoadsInFlight];
#pragma unroll
    for (int k = 0; k < kLoadsInFlight; ++k) {
      v[k] = i + k * threads < vectors ? __ldcs(data + i + k * threads) : uint4{};
    }
#pragma unroll
    for (int k = 0; k < kLoadsInFlight; ++k) acc ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
  }
  return acc;
}

__global__ void read_stream_kernel(const uint4* data, std::int64_t vectors, unsigned* sink) {
  const unsigned acc = __reduce_xor_sync(0xffffffffu, stream_xor(data, vectors));
  if (threadIdx.x % 32 == 0) atomicXor(sink + blockIdx.x, acc);
}

// The bandwidth kernel over the `bytes` (a multiple of 16) at `data`, on `blocks` blocks with a
// word of `sink` each: what a launch that only streams those bytes takes, for the benchmarks to
// set beside an operator that moves as many.
inline void launch_read_stream(const void* data, std::int64_t bytes, unsigned* sink, int blocks,
                               cudaStream_t stream) {
  read_stream_kernel<<<blocks, kReadStreamThreads, 0, stream>>>(static_cast<const uint4*>(data),
                                                                bytes / 16, sink);
  TD_CUDA_CHECK_LAUNCH("read_stream_kernel");
}

// The data flow of every decode that spreads a row over the SMs, with nothing else: a dependent
// launch whose blocks each read one index word first (a decode learns where a row's K and V
// rows are from its index arrays before it can address one), stream their share of the bytes
// from an address that depends on it (the bandwidth kernel's loads), and end as a split decode
// must: each block writes a partial result and counts itself on a completion counter, and the
// last block reads every block's partial, writes the result and resets the counter. `index[0]`
// is not negative (then the stream starts at `data`).
__global__ void split_read_floor_kernel(const uint4* data, std::int64_t vectors,
                                        const std::int32_t* index, unsigned* partials,
                                        unsigned* counter, unsigned* out) {
  cuda::allow_dependent_grids();
  cuda::wait_for_prior_grids();
  __shared__ std::int64_t shift;
  __shared__ unsigned block_acc;
  __shared__ bool last;
  if (threadIdx.x == 0) {
    shift = __ldcg(index) < 0 ? 1 : 0;
    block_acc = 0;
  }
  __syncthreads();
  const unsigned acc = __reduce_xor_sync(0xffffffffu, stream_xor(data + shift, vectors - shift));
  if (threadIdx.x % 32 == 0) atomicXor(&block_acc, acc);
  __syncthreads();
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = block_acc;
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  unsigned all = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) all ^= __ldcg(partials + b);
  all = __reduce_xor_sync(0xffffffffu, all);
  if (threadIdx.x % 32 == 0) atomicXor(out, all);
  if (threadIdx.x == 0) *counter = 0;
}

// The split-decode floor over the `bytes` (a multiple of 16) at `data` on `blocks` blocks:
// `scratch` holds blocks + 2 words, zero before the first launch (partials, the counter, the
// result).
inline void launch_split_read_floor(const void* data, std::int64_t bytes,
                                    const std::int32_t* index, unsigned* scratch, int blocks,
                                    cudaStream_t stream) {
  cuda::launch_dependent(split_read_floor_kernel, dim3(blocks), dim3(kReadStreamThreads), 0,
                         stream, static_cast<const uint4*>(data), bytes / 16, index, scratch,
                         scratch + blocks, scratch + blocks + 1);
}

__global__ void copy_kernel(const uint4* src, uint4* dst, std::int64_t vectors) {
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < vectors; i += threads) {
    __stcs(dst + i, __ldcs(src + i));
  }
}

// Times `launch` (which enqueues work on `stream`) with a pair of events per call, after
// `warmup` untimed calls. Returns the median in microseconds.
inline double median_event_us(cudaStream_t stream, int warmup, int reps,
                              const std::function<void(int)>& launch) {
  for (int i = 0; i < warmup; ++i) launch(i);
  std::vector<cudaEvent_t> events(static_cast<std::size_t>(2 * reps));
  for (auto& e : events) TD_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    TD_CUDA_CHECK(cudaEventRecord(events[2 * i], stream));
    launch(warmup + i);
    TD_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], stream));
  }
  TD_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    float ms = 0.0f;
    TD_CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
    us.push_back(1000.0 * ms);
  }
  for (auto& e : events) TD_CUDA_CHECK(cudaEventDestroy(e));
  return median(us);
}

// Captures `calls` invocations of `launch(i)` into one CUDA graph and returns the median time
// of one call in microseconds (replay time / calls), over `reps` timed replays.
inline double median_graph_us(cudaStream_t stream, int calls, int reps,
                              const std::function<void(int)>& launch) {
  cudaGraph_t graph = nullptr;
  TD_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    for (int i = 0; i < calls; ++i) launch(i);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  TD_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  TD_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double us =
      median_event_us(stream, 2, reps, [&](int) { TD_CUDA_CHECK(cudaGraphLaunch(exec, stream)); });
  TD_CUDA_CHECK(cudaGraphExecDestroy(exec));
  TD_CUDA_CHECK(cudaGraphDestroy(graph));
  return us / calls;
}

// ---- Launch floor. ----

// Does nothing but what a dependent launch must (dependent_launch.cuh): the per-call time of a
// graph of these is what a launch costs here before it moves a byte.
__global__ void empty_dependent_kernel() {
  cuda::allow_dependent_grids();
  cuda::wait_for_prior_grids();
}

// Per-call graph µs of one-warp empty dependent launches, `calls` to a graph (as the benchmarks
// time their operators).
inline double launch_floor_graph_us(cudaStream_t stream, int calls, int reps) {
  return median_graph_us(stream, calls, reps, [&](int) {
    cuda::launch_dependent(empty_dependent_kernel, dim3(1), dim3(32), 0, stream);
  });
}

struct Bandwidth {
  double read_stream_gbps = 0.0;
  double copy_gbps = 0.0;  // bytes read + bytes written
  std::int64_t buffer_bytes = 0;
};

// Both ceilings over a buffer of `bytes` (several times the L2), median of `reps` passes.
inline Bandwidth measure_bandwidth(std::int64_t bytes, int reps, int sm_count,
                                   cudaStream_t stream) {
  const std::int64_t vectors = bytes / static_cast<std::int64_t>(sizeof(uint4));
  uint4* src = nullptr;
  uint4* dst = nullptr;
  unsigned* sink = nullptr;
  const int blocks = read_stream_blocks(sm_count);
  TD_CUDA_CHECK(cudaMalloc(&src, static_cast<std::size_t>(bytes)));
  TD_CUDA_CHECK(cudaMalloc(&dst, static_cast<std::size_t>(bytes)));
  TD_CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned) * static_cast<std::size_t>(blocks)));
  Bandwidth b;
  b.buffer_bytes = bytes;
  try {
    fill_uniform(src, DType::f32, bytes / 4, 1, stream);
    const double read_us = median_event_us(
        stream, 2, reps, [&](int) { launch_read_stream(src, bytes, sink, blocks, stream); });
    const double copy_us = median_event_us(stream, 2, reps, [&](int) {
      copy_kernel<<<blocks, kReadStreamThreads, 0, stream>>>(src, dst, vectors);
      TD_CUDA_CHECK_LAUNCH("copy_kernel");
    });
    b.read_stream_gbps = static_cast<double>(bytes) / (read_us * 1e3);
    b.copy_gbps = 2.0 * static_cast<double>(bytes) / (copy_us * 1e3);
  } catch (...) {
    cudaFree(src);
    cudaFree(dst);
    cudaFree(sink);
    throw;
  }
  TD_CUDA_CHECK(cudaFree(src));
  TD_CUDA_CHECK(cudaFree(dst));
  TD_CUDA_CHECK(cudaFree(sink));
  return b;
}

}  // namespace turbodecode::bench
