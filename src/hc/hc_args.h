// Raw-pointer argument blocks of the HC operators, built from validated TensorViews by the
// public entry points (hc.cpp) and consumed by both backends. Strides count elements.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace turbodecode::hc {

// HC state [T, n, E] with a contiguous E dimension.
struct StateIn {
  const float* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t stream_stride = 0;
  TD_HOST_DEVICE const float* at(std::int64_t t, int h) const {
    return data + t * row_stride + h * stream_stride;
  }
};
struct StateOut {
  float* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t stream_stride = 0;
  TD_HOST_DEVICE float* at(std::int64_t t, int h) const {
    return data + t * row_stride + h * stream_stride;
  }
};

// Rows [T, width] with a contiguous width dimension; data == nullptr means absent.
struct RowsIn {
  const float* data = nullptr;
  std::int64_t stride = 0;
  TD_HOST_DEVICE const float* row(std::int64_t t) const { return data + t * stride; }
};
struct RowsOut {
  float* data = nullptr;
  std::int64_t stride = 0;
  TD_HOST_DEVICE float* row(std::int64_t t) const { return data + t * stride; }
};

// Per-row stream weights [T, n] (pre or post), any strides.
struct WeightsIn {
  const float* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t stream_stride = 0;
  TD_HOST_DEVICE float at(std::int64_t t, int h) const {
    return data[t * row_stride + h * stream_stride];
  }
};

// comb [T, n, n], element (r, c) of row t, any strides.
struct CombIn {
  const float* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t source_stride = 0;
  std::int64_t dest_stride = 0;
  TD_HOST_DEVICE float at(std::int64_t t, int r, int c) const {
    return data[t * row_stride + r * source_stride + c * dest_stride];
  }
};

// The split step: mix rows -> split rows (with the Sinkhorn comb).
struct SplitArgs {
  std::int64_t rows = 0;
  int n_hc = 0;
  int iters = 0;
  float eps = 0.0f;
  RowsIn mix;
  const float* scale = nullptr;  // [3]
  const float* base = nullptr;   // [M]
  RowsOut split;
};

struct CollapseArgs {
  std::int64_t rows = 0;
  int n_hc = 0;
  std::int64_t embd = 0;
  StateIn x;
  WeightsIn pre;
  RowsOut out;
};

struct RmsNormArgs {
  std::int64_t rows = 0;
  std::int64_t embd = 0;
  float eps = 0.0f;
  RowsIn u;
  const float* weight = nullptr;  // [E]
  RowsOut out;
};

// split, collapse with the split's pre, and optionally (norm.out.data != nullptr) the RMSNorm.
// collapse.pre and norm.u are unused: the fused kernels read what they just computed.
struct SplitCollapseArgs {
  SplitArgs split;
  CollapseArgs collapse;
  RmsNormArgs norm;
};

struct ExpandArgs {
  std::int64_t rows = 0;
  int n_hc = 0;
  std::int64_t embd = 0;
  RowsIn block;
  RowsIn add;  // optional
  StateIn x;
  WeightsIn post;
  CombIn comb;
  StateOut out;
};

// norm-mix: x rows of n·E values, mix weight [M, n·E] f16 bits.
struct NormMixArgs {
  std::int64_t rows = 0;
  int n_hc = 0;
  std::int64_t embd = 0;
  int mix_width = 0;
  float eps = 0.0f;
  StateIn x;
  const std::uint16_t* weight = nullptr;
  std::int64_t weight_stride = 0;
  RowsOut mix;
};

// Output-head weights: logits [T, n] -> weights [T, n].
struct HeadWeightsArgs {
  std::int64_t rows = 0;
  int n_hc = 0;
  float post_scale = 1.0f;
  float eps = 0.0f;
  WeightsIn logits;
  const float* scale = nullptr;  // [1]
  const float* base = nullptr;   // [n]
  float* weights = nullptr;
  std::int64_t weights_row_stride = 0;
  std::int64_t weights_stream_stride = 0;
};

}  // namespace turbodecode::hc
