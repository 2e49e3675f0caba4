// Appends two tokens to a small CPU cache and decodes one query through the installed library;
// exits non-zero unless the output matches attention computed here in double precision.
#include <turbodecode/turbodecode.h>

#include <cmath>
#include <cstdio>
#include <vector>

using namespace turbodecode;

namespace {

constexpr int kDim = 256, kHeads = 2, kTokens = 2;

// Both query heads read the one KV head; the cache rounds K to f16 and quantizes V to 8 bits,
// so the comparison allows 2% relative error.
double relative_error(const std::vector<float>& q, const std::vector<float>& k,
                      const std::vector<float>& v, const std::vector<float>& out) {
  double error = 0, norm = 0;
  for (int h = 0; h < kHeads; ++h) {
    double scores[kTokens], top = -INFINITY, total = 0;
    for (int p = 0; p < kTokens; ++p) {
      scores[p] = 0;
      for (int d = 0; d < kDim; ++d) scores[p] += double(q[h * kDim + d]) * k[p * kDim + d];
      scores[p] /= std::sqrt(double(kDim));
      top = std::fmax(top, scores[p]);
    }
    for (double& s : scores) total += s = std::exp(s - top);
    for (int d = 0; d < kDim; ++d) {
      double expected = 0;
      for (int p = 0; p < kTokens; ++p) expected += scores[p] / total * v[p * kDim + d];
      error += std::pow(out[h * kDim + d] - expected, 2);
      norm += expected * expected;
    }
  }
  return std::sqrt(error / norm);
}

}  // namespace

int main() {
  KvCache cache({.slots = 1,
                 .n_kv_heads = 1,
                 .capacity = 16,
                 .head_dim = kDim,
                 .k_format = RowFormat::f16,
                 .v_format = RowFormat::tq8});
  std::vector<float> k(kTokens * kDim), v(kTokens * kDim), q(kHeads * kDim);
  std::vector<float> out(kHeads * kDim, NAN);
  for (int i = 0; i < kTokens * kDim; ++i) {
    k[i] = std::sin(0.1f * i);
    v[i] = std::cos(0.2f * i);
  }
  for (int i = 0; i < kHeads * kDim; ++i) q[i] = std::sin(0.3f * i);
  std::vector<int> slots = {0, 0}, positions = {0, 1};
  append_kv(cache.view(), TensorView::contiguous(k.data(), DType::f32, {kTokens, 1, kDim}),
            TensorView::contiguous(v.data(), DType::f32, {kTokens, 1, kDim}),
            TensorView::contiguous(slots.data(), DType::i32, {kTokens}),
            TensorView::contiguous(positions.data(), DType::i32, {kTokens}));

  const DecodePlan plan = plan_decode(cache.config(), {.n_heads = kHeads}, /*max_queries=*/1);
  Buffer workspace(Device::cpu, plan.workspace_bytes);
  std::vector<int> query_slot = {0}, query_pos = {kTokens - 1};
  run_decode(plan, cache.view(), TensorView::contiguous(q.data(), DType::f32, {1, kHeads, kDim}),
             TensorView::contiguous(query_slot.data(), DType::i32, {1}),
             TensorView::contiguous(query_pos.data(), DType::i32, {1}),
             TensorView::contiguous(out.data(), DType::f32, {1, kHeads, kDim}),
             workspace.view(DType::u8, {plan.workspace_bytes}));
  const double error = relative_error(q, k, v, out);
  std::printf("turbodecode_consumer: relative error %.2e (CUDA backend %s)\n", error,
              cuda_available() ? "available" : "not available");
  return error <= 2e-2 ? 0 : 1;
}
