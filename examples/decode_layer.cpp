// The README's library snippet as a program: one sliding-window layer of 8 sequences, the
// first token of each appended, then one decode step, on the GPU when there is one, else on the
// CPU. It uses the public API only. examples/readme_snippet.cmake checks that every line of the
// README's snippet appears here, in order (clang-format is off where it would rewrap them).
#include <turbodecode/turbodecode.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

using namespace turbodecode;

namespace {

constexpr int kSequences = 8;
constexpr int kKvHeads = 8;
constexpr int kHeads = 16;
constexpr int kHeadDim = 256;

// A buffer on `device` holding a copy of `values`.
template <class T>
Buffer copy_to(Device device, const std::vector<T>& values) {
  const auto bytes = static_cast<std::int64_t>(values.size() * sizeof(T));
  Buffer buffer(device, bytes);
  buffer.copy_from_host(values.data(), bytes);
  return buffer;
}

std::vector<float> gaussian(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng);
  return values;
}

}  // namespace

int main() {
  // One sliding-window layer: 8 sequences, ring of 1024 rows, K F16, V 8-bit TurboQuant-HB,
  // on the GPU when there is one.
  const Device device = cuda_available() ? Device::cuda : Device::cpu;
  // clang-format off
  KvCache cache({.slots = 8, .n_kv_heads = 8, .capacity = 1024, .head_dim = 256,
                 .kind = LayerKind::ring, .k_format = RowFormat::f16,
                 .v_format = RowFormat::tq8, .device = device});
  // clang-format on

  // The inputs: one token per sequence at position 0 (slot i, position 0), and its query.
  std::mt19937 rng(2026);
  const std::int64_t n = kSequences;
  const std::size_t kv_values = static_cast<std::size_t>(n) * kKvHeads * kHeadDim;
  const std::size_t q_values = static_cast<std::size_t>(n) * kHeads * kHeadDim;
  const Buffer k_data = copy_to(device, gaussian(kv_values, rng));
  const Buffer v_data = copy_to(device, gaussian(kv_values, rng));
  const Buffer q_data = copy_to(device, gaussian(q_values, rng));
  std::vector<std::int32_t> slot_values(kSequences);
  for (int i = 0; i < kSequences; ++i) slot_values[static_cast<std::size_t>(i)] = i;
  const Buffer slot_data = copy_to(device, slot_values);
  const Buffer position_data = copy_to(device, std::vector<std::int32_t>(kSequences, 0));
  const Buffer out_data(device, static_cast<std::int64_t>(q_values * sizeof(float)));
  const TensorView k = k_data.view(DType::f32, {n, kKvHeads, kHeadDim});
  const TensorView v = v_data.view(DType::f32, {n, kKvHeads, kHeadDim});
  const TensorView q = q_data.view(DType::f32, {n, kHeads, kHeadDim});
  const TensorView slot_ids = slot_data.view(DType::i32, {n});
  const TensorView positions = position_data.view(DType::i32, {n});
  const TensorView seq_pos = positions;  // each query is its sequence's last token
  const TensorView out = out_data.view(DType::f32, {n, kHeads, kHeadDim});
  const Stream stream;

  // Quantize-on-write: k, v [n, 8, 256] f32/f16/bf16; slot_ids, positions [n] i32.
  append_kv(cache.view(), k, v, slot_ids, positions, stream);

  // Plan once (validates, picks the chunk policy, sizes the workspace), run every step.
  // clang-format off
  DecodePlan plan = plan_decode(cache.config(),
                                {.n_heads = 16, .mask = MaskKind::sliding_ring,
                                 .sliding_window = 1024},
                                /*max_queries=*/8);
  Buffer workspace(device, plan.workspace_bytes);
  workspace.fill_bytes(0);  // once: the CUDA backend keeps self-resetting counters there
  run_decode(plan, cache.view(), q, slot_ids, seq_pos, out,
             workspace.view(DType::u8, {plan.workspace_bytes}), stream);
  // clang-format on

  // A query that sees one position returns that position's V row (its KV head's, in 8-bit
  // TurboQuant-HB): check that each output row is within 2% of it.
  synchronize(stream);
  std::vector<float> result(q_values);
  out_data.copy_to_host(result.data(), static_cast<std::int64_t>(q_values * sizeof(float)));
  std::vector<float> v_rows(kv_values);
  v_data.copy_to_host(v_rows.data(), static_cast<std::int64_t>(kv_values * sizeof(float)));
  for (std::size_t row = 0; row < kSequences * kHeads; ++row) {
    const std::size_t kv_row = row / kHeads * kKvHeads + row % kHeads / (kHeads / kKvHeads);
    double error = 0.0;
    double norm = 0.0;
    for (std::size_t d = 0; d < kHeadDim; ++d) {
      const double want = v_rows[kv_row * kHeadDim + d];
      const double got = result[row * kHeadDim + d];
      error += (got - want) * (got - want);
      norm += want * want;
    }
    if (!(error <= 0.02 * 0.02 * norm)) {
      std::fprintf(stderr, "decode_layer: output row %zu is not its V row\n", row);
      return 1;
    }
  }
  std::printf("decode_layer: %d sequences decoded on the %s backend\n", kSequences,
              device_name(device));
  return 0;
}
