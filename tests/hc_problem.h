// Random HC problems (SPEC §3) and views of them on either backend, shared by hc_test.cc,
// q8_test.cc and hc_gpu_test.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "common/f16.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/hc.h"
#include "turbodecode/q8.h"

namespace turbodecode::testing {

// A view of `shape` with explicit element strides into `buffer`, from element `offset`.
inline TensorView strided_view(const Buffer& buffer, DType dtype,
                               std::initializer_list<std::int64_t> shape,
                               std::initializer_list<std::int64_t> strides,
                               std::int64_t offset = 0) {
  TensorView v;
  v.data =
      static_cast<char*>(buffer.data()) + offset * static_cast<std::int64_t>(dtype_bytes(dtype));
  v.dtype = dtype;
  v.device = buffer.device();
  v.rank = static_cast<int>(shape.size());
  int d = 0;
  for (std::int64_t s : shape) v.shape[d++] = s;
  d = 0;
  for (std::int64_t s : strides) v.strides[d++] = s;
  return v;
}

// An f32 output buffer of `count` values, filled with NaN.
inline Buffer poisoned(Device device, std::int64_t count, DType dtype = DType::f32) {
  Buffer buffer(device, count * static_cast<std::int64_t>(dtype_bytes(dtype)));
  buffer.fill_bytes(0xFF);
  return buffer;
}

inline std::vector<double> widen(const float* data, std::int64_t count) {
  return {data, data + count};
}

// Host inputs of one HC problem. x rows are padded when `strided`: stream stride E + 4 and row
// stride n·(E + 4) + 8, so every strided path is exercised.
// One shape of an HC test case: streams, width, token rows, and whether the views are strided.
struct HcShape {
  int n_hc;
  std::int64_t embd;
  std::int64_t rows;
  bool strided;
};

struct HcProblem {
  HcParams params;
  std::int64_t rows = 1;
  std::int64_t x_row_stride = 0;
  std::int64_t x_stream_stride = 0;
  std::vector<float> x, mix, scale, base, norm_weight, block, add;
  std::vector<std::uint16_t> mix_weight;  // f16 bits [M, n·E]

  int mix_width() const { return hc_mix_width(params.n_hc); }
  std::int64_t width() const { return params.n_hc * params.embd; }
  // Row t of x, unpadded ([h][d]), in double.
  std::vector<double> x_row(std::int64_t t) const {
    std::vector<double> out;
    for (int h = 0; h < params.n_hc; ++h) {
      const float* s = x.data() + t * x_row_stride + h * x_stream_stride;
      out.insert(out.end(), s, s + params.embd);
    }
    return out;
  }
  std::vector<double> mix_weight_double() const {
    std::vector<double> out(mix_weight.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(mix_weight[i]);
    return out;
  }
};

inline HcProblem make_hc_problem(const HcParams& params, std::int64_t rows, std::uint64_t seed,
                                 bool strided, float logit_stddev = 1.0f) {
  HcProblem p;
  p.params = params;
  p.rows = rows;
  const std::int64_t e = params.embd;
  const int n = params.n_hc;
  const int m = hc_mix_width(n);
  p.x_stream_stride = strided ? e + 4 : e;
  p.x_row_stride = strided ? n * (e + 4) + 8 : n * e;
  p.x = gaussian(static_cast<std::size_t>(rows * p.x_row_stride), seed);
  p.mix = gaussian(static_cast<std::size_t>(rows * m), seed + 1, logit_stddev);
  p.scale = gaussian(3, seed + 2, 0.5f);
  p.base = gaussian(static_cast<std::size_t>(m), seed + 3, 0.5f);
  p.norm_weight = gaussian(static_cast<std::size_t>(e), seed + 4);
  p.block = gaussian(static_cast<std::size_t>(rows * e), seed + 5);
  p.add = gaussian(static_cast<std::size_t>(rows * e), seed + 6);
  const auto w = gaussian(static_cast<std::size_t>(m * n * e), seed + 7, 0.05f);
  p.mix_weight.resize(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) p.mix_weight[i] = f32_to_f16(w[i]);
  return p;
}

// A problem's inputs on one device.
struct HcDeviceInputs {
  const HcProblem& problem;
  Buffer x, mix, scale, base, norm_weight, block, add, mix_weight;

  HcDeviceInputs(const HcProblem& p, Device device)
      : problem(p),
        x(to_device(device, p.x)),
        mix(to_device(device, p.mix)),
        scale(to_device(device, p.scale)),
        base(to_device(device, p.base)),
        norm_weight(to_device(device, p.norm_weight)),
        block(to_device(device, p.block)),
        add(to_device(device, p.add)),
        mix_weight(to_device(device, p.mix_weight)) {}

  std::int64_t rows() const { return problem.rows; }
  int n() const { return problem.params.n_hc; }
  std::int64_t e() const { return problem.params.embd; }
  int m() const { return problem.mix_width(); }
  TensorView x_view() const {
    return strided_view(x, DType::f32, {rows(), n(), e()},
                        {problem.x_row_stride, problem.x_stream_stride, 1});
  }
  TensorView mix_view() const { return mix.view(DType::f32, {rows(), m()}); }
  TensorView scale_view() const { return scale.view(DType::f32, {3}); }
  TensorView base_view() const { return base.view(DType::f32, {m()}); }
  TensorView norm_weight_view() const { return norm_weight.view(DType::f32, {e()}); }
  TensorView block_view() const { return block.view(DType::f32, {rows(), e()}); }
  TensorView add_view() const { return add.view(DType::f32, {rows(), e()}); }
  TensorView mix_weight_view() const { return mix_weight.view(DType::f16, {m(), n() * e()}); }
};

// pre, post and comb as views into a split buffer [T, M].
inline TensorView pre_view(const Buffer& split, std::int64_t rows, int n) {
  return strided_view(split, DType::f32, {rows, n}, {hc_mix_width(n), 1});
}
inline TensorView post_view(const Buffer& split, std::int64_t rows, int n) {
  return strided_view(split, DType::f32, {rows, n}, {hc_mix_width(n), 1}, n);
}
inline TensorView comb_view(const Buffer& split, std::int64_t rows, int n) {
  return strided_view(split, DType::f32, {rows, n, n}, {hc_mix_width(n), n, 1}, 2 * n);
}

// Random Q8_0 weights [rows, q8_row_bytes(cols)] quantized from N(0, 1) values on the CPU.
inline std::vector<std::uint8_t> random_q8_weight(std::int64_t rows, std::int64_t cols,
                                                  std::uint64_t seed) {
  auto values = gaussian(static_cast<std::size_t>(rows * cols), seed);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * q8_row_bytes(cols)));
  quantize_q8_0(TensorView::contiguous(values.data(), DType::f32, {rows, cols}),
                TensorView::contiguous(q.data(), DType::u8, {rows, q8_row_bytes(cols)}));
  return q;
}

}  // namespace turbodecode::testing
