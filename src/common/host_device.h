// Marks functions shared verbatim by the CPU backend and CUDA kernels.
#pragma once

#if defined(__CUDACC__)
#define TD_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TD_HOST_DEVICE inline
#endif

// Marks constexpr layout arithmetic that kernels, their host-side launchers and host tests all
// evaluate.
#if defined(__CUDACC__)
#define TD_HOST_DEVICE_CONSTEXPR __host__ __device__ constexpr
#else
#define TD_HOST_DEVICE_CONSTEXPR constexpr
#endif
