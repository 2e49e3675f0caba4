#include "decode_cases.h"

#include <algorithm>
#include <array>
#include <random>

#include "turbodecode/tq_codec.h"

namespace turbodecode::testing {
namespace {

// Lengths the matrix draws from: 1 (a row that sees only itself), tile and chunk edges, long
// ones.
constexpr std::int32_t kLengths[] = {1,   2,    17,   32,   33,   100,  511,
                                     513, 1024, 1500, 2047, 3000, 4097, 5000};
constexpr int kRunsPerCase = 2;

// First position of a run of `tokens` rows whose last row sees `length` positions.
std::int32_t run_start(Visibility visibility, std::int64_t capacity, std::int32_t length,
                       int tokens) {
  std::int64_t last = length - 1;
  if (visibility == Visibility::ring_unwrapped) last = length % (capacity - 1);  // never fills
  if (visibility == Visibility::ring_wrapped) last = capacity + length - 1;
  if (visibility <= Visibility::sliding_linear) last = std::min<std::int64_t>(last, capacity - 1);
  return static_cast<std::int32_t>(std::max<std::int64_t>(last - tokens + 1, 0));
}

}  // namespace

std::string describe(const KvCacheConfig& cache, const DecodeOptions& options) {
  return std::string(cache.kind == LayerKind::ring ? "ring" : "linear") +
         " mask=" + std::to_string(static_cast<int>(options.mask)) +
         " D=" + std::to_string(cache.head_dim) + " K=" + format_name(cache.k_format) +
         " V=" + format_name(cache.v_format) + " heads=" + std::to_string(options.n_heads) +
         " kv_heads=" + std::to_string(cache.n_kv_heads) +
         " query_tokens=" + std::to_string(options.query_tokens) +
         " chunk=" + std::to_string(options.fixed_chunk_positions) +
         " page=" + std::to_string(cache.page_size) +
         " softcap=" + std::to_string(options.softcap) +
         " rotated=" + std::to_string(options.rotated_output) +
         " scale=" + std::to_string(options.scale) +
         " sf=" + std::to_string(cache.scale_factor_d512) +
         " cap=" + std::to_string(cache.capacity) +
         " window=" + std::to_string(options.sliding_window);
}

std::string DecodeCase::describe() const {
  std::string s =
      testing::describe(cache, options) + " padding=" + std::to_string(row_padding) + " pos=";
  for (auto p : positions) s += std::to_string(p) + ",";
  return s;
}

std::vector<DecodeCase> decode_matrix(std::span<const RowFormat> k_formats,
                                      std::span<const RowFormat> v_formats) {
  std::mt19937 design(20261202);  // fixed: the design is reproducible, the data is not
  const auto pick = [&](const auto& values) { return values[design() % std::size(values)]; };
  std::vector<DecodeCase> cases;
  for (int vis = 0; vis < 4; ++vis) {
    const auto visibility = static_cast<Visibility>(vis);
    const bool ring = visibility >= Visibility::ring_unwrapped;
    for (RowFormat k : k_formats) {
      for (RowFormat v : v_formats) {
        DecodeCase c;
        c.cache.slots = kRunsPerCase;
        c.cache.head_dim = pick(std::array{256, 512});
        c.cache.n_kv_heads = pick(std::array{1, 2});
        c.cache.kind = ring ? LayerKind::ring : LayerKind::linear;
        c.cache.k_format = k;
        c.cache.v_format = v;
        c.cache.scale_factor_d512 = pick(std::array{1.0f, 2.5f});
        c.cache.capacity = ring ? pick(std::array{64, 1000, 4096}) : 5000;
        c.cache.page_size = pick(std::array{0, 0, 16, 64, 128});
        c.cache.pages = c.cache.page_size > 0 ? c.cache.slots * pages_per_slot(c.cache) : 0;
        c.options.n_heads = pick(std::array{1, 2, 3, 4, 8, 16}) * c.cache.n_kv_heads;
        c.options.mask = visibility == Visibility::causal           ? MaskKind::causal
                         : visibility == Visibility::sliding_linear ? MaskKind::sliding_linear
                                                                    : MaskKind::sliding_ring;
        c.options.query_tokens = pick(std::array{1, 1, 2, 3, 8});
        c.options.fixed_chunk_positions = pick(std::array<std::int64_t, 5>{0, 0, 32, 96, 512});
        c.options.softcap = design() % 2 ? 2.5f : 0.0f;
        c.options.rotated_output = design() % 2;
        c.options.scale = pick(std::array{0.0f, 0.0f, 1.0f, 0.03f});
        c.row_padding = pick(std::array{0, 0, 32});
        std::int64_t window = pick(std::array<std::int64_t, 4>{0, 1, 100, 700});
        if (visibility == Visibility::causal) window = 0;
        if (ring && c.options.query_tokens > 1) {  // a draft on a ring needs a window it keeps
          if (window == 0) window = pick(std::array<std::int64_t, 3>{1, 100, 700});
          window = std::min(window, c.cache.capacity - c.options.query_tokens + 1);
        }
        c.options.sliding_window = window;
        for (int run = 0; run < kRunsPerCase; ++run) {
          const std::int32_t first =
              run_start(visibility, c.cache.capacity, pick(kLengths), c.options.query_tokens);
          for (int t = 0; t < c.options.query_tokens; ++t) {
            c.slots.push_back(kRunsPerCase - 1 - run);
            c.positions.push_back(first + t);
          }
        }
        cases.push_back(c);
      }
    }
  }
  return cases;
}

}  // namespace turbodecode::testing
