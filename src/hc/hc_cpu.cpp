#include "hc/hc_cpu.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/f16.h"
#include "common/thread_pool.h"
#include "hc/hc_math.h"
#include "q8/validate_q8.h"

namespace turbodecode::hc {
namespace {

// Partial sums kept in 8 fixed lanes (element d goes to lane d % 8), added pairwise at the end:
// vectorisable and independent of threading.
constexpr int kLanes = 8;

float sum_lanes(float* lanes) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

// The partial sums live in a local copy of the lanes so the compiler can keep them in one
// vector register (the caller's array may alias the inputs as far as it can tell).
void add_squares(const float* u, std::int64_t width, float* out_lanes) {
  float lanes[kLanes];
  std::memcpy(lanes, out_lanes, sizeof lanes);
  std::int64_t d = 0;
  for (; d + kLanes <= width; d += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = fmaf(u[d + l], u[d + l], lanes[l]);
  }
  for (; d < width; ++d) lanes[d % kLanes] = fmaf(u[d], u[d], lanes[d % kLanes]);
  std::memcpy(out_lanes, lanes, sizeof lanes);
}

void split_row(const SplitArgs& args, std::int64_t t) {
  hc_split_row_any(args.mix.row(t), args.scale, args.base, args.n_hc, args.iters, args.eps,
                   args.split.row(t));
}

// out = Σ_h pre[h]·x[h], streams in ascending order, vectorised along d.
void collapse_row(const CollapseArgs& args, const float* pre, std::int64_t pre_stride,
                  std::int64_t t) {
  float* out = args.out.row(t);
  for (std::int64_t d = 0; d < args.embd; ++d) out[d] = 0.0f;
  for (int h = 0; h < args.n_hc; ++h) {
    const float w = pre[h * pre_stride];
    const float* x = args.x.at(t, h);
    for (std::int64_t d = 0; d < args.embd; ++d) out[d] = hc_accumulate(out[d], w, x[d]);
  }
}

void rms_norm_row(const RmsNormArgs& args, const float* u, std::int64_t t) {
  float lanes[kLanes] = {};
  add_squares(u, args.embd, lanes);
  const float scale = hc_rms_scale(sum_lanes(lanes), args.embd, args.eps);
  float* out = args.out.row(t);
  for (std::int64_t d = 0; d < args.embd; ++d) out[d] = hc_rms_apply(u[d], scale, args.weight[d]);
}

void expand_stream(const ExpandArgs& args, std::int64_t t, int c) {
  const float* block = args.block.row(t);
  const float* add = args.add.data != nullptr ? args.add.row(t) : nullptr;
  const float post = args.post.at(t, c);
  float* out = args.out.at(t, c);
  for (std::int64_t d = 0; d < args.embd; ++d) out[d] = hc_block_input(block[d], add, d) * post;
  for (int r = 0; r < args.n_hc; ++r) {
    const float w = args.comb.at(t, r, c);
    const float* x = args.x.at(t, r);
    for (std::int64_t d = 0; d < args.embd; ++d) out[d] = hc_accumulate(out[d], w, x[d]);
  }
}

// Row t's raw norm-mix products Σ_i W[k][i]·x_i for outputs k0 .. k0 + count − 1 (count ≤
// kNormMixGroup). Each output keeps 8 lanes (element d of a stream in lane d % 8, streams in
// order) in one AVX2 register, F16 weights widened 8 at a time by F16C; one pass over x serves
// the whole group (a scalar loop converting one weight at a time is several times slower:
// docs/hc.md, "Tried, not kept").
constexpr int kNormMixGroup = 8;

void norm_mix_products(const NormMixArgs& args, std::int64_t t, int k0, int count, float* sums) {
  __m256 acc[kNormMixGroup];
  for (int j = 0; j < kNormMixGroup; ++j) acc[j] = _mm256_setzero_ps();
  const auto weight_row = [&](int j, int h) {
    return args.weight + (k0 + j) * args.weight_stride + h * args.embd;
  };
  for (int h = 0; h < args.n_hc; ++h) {
    const float* x = args.x.at(t, h);
    std::int64_t d = 0;
    for (; d + kLanes <= args.embd; d += kLanes) {
      const __m256 xv = _mm256_loadu_ps(x + d);
      for (int j = 0; j < count; ++j) {
        const __m256 w = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(weight_row(j, h) + d)));
        acc[j] = _mm256_fmadd_ps(w, xv, acc[j]);
      }
    }
    for (int j = 0; j < count; ++j) {
      float lanes[kLanes];
      _mm256_storeu_ps(lanes, acc[j]);
      for (std::int64_t e = d; e < args.embd; ++e) {
        lanes[e % kLanes] = fmaf(f16_to_f32(weight_row(j, h)[e]), x[e], lanes[e % kLanes]);
      }
      acc[j] = _mm256_loadu_ps(lanes);
    }
  }
  for (int j = 0; j < count; ++j) {
    float lanes[kLanes];
    _mm256_storeu_ps(lanes, acc[j]);
    sums[j] = sum_lanes(lanes);
  }
}

// Σ_i x_i² of row t, in the lanes of add_squares, streams in order.
float norm_mix_squares(const NormMixArgs& args, std::int64_t t) {
  float lanes[kLanes] = {};
  for (int h = 0; h < args.n_hc; ++h) add_squares(args.x.at(t, h), args.embd, lanes);
  return sum_lanes(lanes);
}

}  // namespace

void split_cpu(const SplitArgs& args) {
  parallel_for(args.rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) split_row(args, t);
  });
}

void collapse_cpu(const CollapseArgs& args) {
  parallel_for(args.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      collapse_row(args, args.pre.data + t * args.pre.row_stride, args.pre.stream_stride, t);
    }
  });
}

void rms_norm_cpu(const RmsNormArgs& args) {
  parallel_for(args.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) rms_norm_row(args, args.u.row(t), t);
  });
}

void split_collapse_cpu(const SplitCollapseArgs& args) {
  parallel_for(args.split.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      split_row(args.split, t);
      collapse_row(args.collapse, args.split.split.row(t), 1, t);
      if (args.norm.out.data != nullptr) rms_norm_row(args.norm, args.collapse.out.row(t), t);
    }
  });
}

void expand_cpu(const ExpandArgs& args) {
  parallel_for(args.rows * args.n_hc, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      expand_stream(args, i / args.n_hc, static_cast<int>(i % args.n_hc));
    }
  });
}

void head_weights_cpu(const HeadWeightsArgs& args) {
  for (std::int64_t t = 0; t < args.rows; ++t) {
    for (int h = 0; h < args.n_hc; ++h) {
      args.weights[t * args.weights_row_stride + h * args.weights_stream_stride] = hc_head_weight(
          args.logits.at(t, h), args.scale[0], args.base[h], args.post_scale, args.eps);
    }
  }
}

void norm_mix_cpu(const NormMixArgs& args) {
  const int m = args.mix_width;
  const int groups = (m + kNormMixGroup - 1) / kNormMixGroup;
  const int items_per_row = groups + 1;  // the output groups, then Σ x²
  std::vector<float> sums(static_cast<std::size_t>(args.rows * (m + 1)));
  // A row's items stay on one thread: at T = 1 waking a worker costs more than it saves.
  parallel_for(args.rows * items_per_row, items_per_row, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t t = i / items_per_row;
      const int group = static_cast<int>(i % items_per_row);
      float* row = sums.data() + t * (m + 1);
      if (group == groups) {
        row[m] = norm_mix_squares(args, t);
      } else {
        const int k0 = group * kNormMixGroup;
        norm_mix_products(args, t, k0, std::min(kNormMixGroup, m - k0), row + k0);
      }
    }
  });
  const std::int64_t width = args.n_hc * args.embd;
  for (std::int64_t t = 0; t < args.rows; ++t) {
    const float* row = sums.data() + t * (m + 1);
    const float rho = hc_rms_scale(row[m], width, args.eps);
    for (int k = 0; k < m; ++k) args.mix.row(t)[k] = rho * row[k];
  }
}

void pre_cpu(const PreArgs& args) {
  norm_mix_cpu(args.norm_mix);
  split_collapse_cpu(args.split_collapse);
}

void expand_q8_cpu(const ExpandQ8Args& args) {
  q8::matvec_cpu(args.matvec);
  expand_cpu(args.expand);
}

}  // namespace turbodecode::hc
