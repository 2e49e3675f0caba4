// The CPU backend of the HC operators, compiled once per Highway target; each *_cpu function
// runs the best one the CPU supports. Vectors run along E; per element, the arithmetic is that
// of hc_math.h.
#include "hc/hc_cpu.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hc/hc_cpu.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/f16.h"
#include "common/simd/lane_sums-inl.h"
#include "common/simd/vector_pack-inl.h"
#include "common/thread_pool.h"
#include "hc/hc_math.h"
#include "hwy/highway.h"
#include "q8/validate_q8.h"

HWY_BEFORE_NAMESPACE();
namespace turbodecode::hc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using turbodecode::simd::HWY_NAMESPACE::pick;
using turbodecode::simd::HWY_NAMESPACE::store_lane_sums;
using turbodecode::simd::HWY_NAMESPACE::unroll;
using turbodecode::simd::HWY_NAMESPACE::with_vectors;
namespace {

using HcTag = hn::ScalableTag<float>;

// Partial sums kept in the lanes of one vector (element d of a row in lane d % Lanes), added
// in a fixed tree at the end: vectorised and independent of threading. The products a(e)·b[e]
// of a row's last elements, which fill no whole vector, go into their lanes one by one.
template <class D, class Factor>
HWY_INLINE hn::Vec<D> add_tail_products(D d, hn::Vec<D> sums, std::int64_t from, std::int64_t width,
                                        const Factor& a, const float* b) {
  if (from == width) return sums;
  HWY_ALIGN float lanes[hn::MaxLanes(d)];
  hn::Store(sums, d, lanes);
  for (std::int64_t e = from; e < width; ++e) lanes[e - from] = fmaf(a(e), b[e], lanes[e - from]);
  return hn::Load(d, lanes);
}

// sums + the squares of u[0, width), element d in lane d % Lanes.
hn::Vec<HcTag> add_squares(const float* u, std::int64_t width, hn::Vec<HcTag> sums) {
  const HcTag d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t e = 0;
  for (; e + lanes <= width; e += lanes) {
    const auto v = hn::LoadU(d, u + e);
    sums = hn::MulAdd(v, v, sums);
  }
  return add_tail_products(
      d, sums, e, width, [&](std::int64_t i) { return u[i]; }, u);
}

float sum_lanes(hn::Vec<HcTag> sums) {
  float sum;
  store_lane_sums(HcTag(), &sum, sums);
  return sum;
}

void split_row(const SplitArgs& args, std::int64_t t) {
  hc_split_row_any(args.mix.row(t), args.scale, args.base, args.n_hc, args.iters, args.eps,
                   args.split.row(t));
}

// out = Σ_h pre[h]·x[h], streams in ascending order, vectorised along d.
void collapse_row(const CollapseArgs& args, const float* pre, std::int64_t pre_stride,
                  std::int64_t t) {
  const HcTag d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  float* out = args.out.row(t);
  std::int64_t e = 0;
  for (; e + lanes <= args.embd; e += lanes) {
    auto sum = hn::Zero(d);
    for (int h = 0; h < args.n_hc; ++h) {
      sum = hn::MulAdd(hn::Set(d, pre[h * pre_stride]), hn::LoadU(d, args.x.at(t, h) + e), sum);
    }
    hn::StoreU(sum, d, out + e);
  }
  for (; e < args.embd; ++e) {
    float sum = 0.0f;
    for (int h = 0; h < args.n_hc; ++h)
      sum = hc_accumulate(sum, pre[h * pre_stride], args.x.at(t, h)[e]);
    out[e] = sum;
  }
}

void rms_norm_row(const RmsNormArgs& args, const float* u, std::int64_t t) {
  const HcTag d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const float scale =
      hc_rms_scale(sum_lanes(add_squares(u, args.embd, hn::Zero(d))), args.embd, args.eps);
  float* out = args.out.row(t);
  std::int64_t e = 0;
  for (; e + lanes <= args.embd; e += lanes) {
    const auto normed = hn::Mul(hn::LoadU(d, u + e), hn::Set(d, scale));
    hn::StoreU(hn::Mul(normed, hn::LoadU(d, args.weight + e)), d, out + e);
  }
  for (; e < args.embd; ++e) out[e] = hc_rms_apply(u[e], scale, args.weight[e]);
}

void expand_stream(const ExpandArgs& args, std::int64_t t, int c) {
  const HcTag d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const float* block = args.block.row(t);
  const float* add = args.add.data != nullptr ? args.add.row(t) : nullptr;
  const float post = args.post.at(t, c);
  float* out = args.out.at(t, c);
  std::int64_t e = 0;
  for (; e + lanes <= args.embd; e += lanes) {
    auto input = hn::LoadU(d, block + e);
    if (add != nullptr) input = hn::Add(input, hn::LoadU(d, add + e));
    auto sum = hn::Mul(input, hn::Set(d, post));
    for (int r = 0; r < args.n_hc; ++r) {
      sum = hn::MulAdd(hn::Set(d, args.comb.at(t, r, c)), hn::LoadU(d, args.x.at(t, r) + e), sum);
    }
    hn::StoreU(sum, d, out + e);
  }
  for (; e < args.embd; ++e) {
    float sum = hc_block_input(block[e], add, e) * post;
    for (int r = 0; r < args.n_hc; ++r)
      sum = hc_accumulate(sum, args.comb.at(t, r, c), args.x.at(t, r)[e]);
    out[e] = sum;
  }
}

// Row t's raw norm-mix products Σ_i W[k][i]·x_i for outputs k0 .. k0 + count − 1 (count ≤
// kNormMixGroup). Each output keeps its partial sums in the lanes of one vector (element d of
// a stream in lane d % Lanes, streams in order), F16 weights widened a vector at a time; one
// pass over x serves the whole group (a scalar loop converting one weight at a time is several
// times slower: docs/hc.md, "Tried, not kept").
constexpr int kNormMixGroup = 8;

void norm_mix_products(const NormMixArgs& args, std::int64_t t, int k0, int count, float* sums) {
  const HcTag d;
  const hn::Rebind<hwy::float16_t, HcTag> dh;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const auto weight_row = [&](int j, int h) {
    return args.weight + (k0 + j) * args.weight_stride + h * args.embd;
  };
  with_vectors<kNormMixGroup>(
      [&](auto) TD_INLINE_LAMBDA { return hn::Zero(d); },
      [&](auto&... acc) TD_INLINE_LAMBDA {
        for (int h = 0; h < args.n_hc; ++h) {
          const float* x = args.x.at(t, h);
          std::int64_t e = 0;
          for (; e + lanes <= args.embd; e += lanes) {
            const auto xv = hn::LoadU(d, x + e);
            unroll<kNormMixGroup>([&](auto j) TD_INLINE_LAMBDA {
              if (j >= count) return;
              const auto* w = reinterpret_cast<const hwy::float16_t*>(weight_row(j, h) + e);
              auto& sum = pick<j>(acc...);
              sum = hn::MulAdd(hn::PromoteTo(d, hn::LoadU(dh, w)), xv, sum);
            });
          }
          unroll<kNormMixGroup>([&](auto j) TD_INLINE_LAMBDA {
            if (j >= count) return;
            auto& sum = pick<j>(acc...);
            sum = add_tail_products(
                d, sum, e, args.embd,
                [&](std::int64_t i) { return f16_to_f32(weight_row(j, h)[i]); }, x);
          });
        }
        float group_sums[kNormMixGroup];
        store_lane_sums(d, group_sums, acc...);
        std::copy_n(group_sums, count, sums);
      });
}

// Σ_i x_i² of row t, in the lanes of add_squares, streams in order.
float norm_mix_squares(const NormMixArgs& args, std::int64_t t) {
  auto sums = hn::Zero(HcTag());
  for (int h = 0; h < args.n_hc; ++h) sums = add_squares(args.x.at(t, h), args.embd, sums);
  return sum_lanes(sums);
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

}  // namespace turbodecode::hc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace turbodecode::hc {

HWY_EXPORT(split_cpu);
HWY_EXPORT(collapse_cpu);
HWY_EXPORT(rms_norm_cpu);
HWY_EXPORT(split_collapse_cpu);
HWY_EXPORT(expand_cpu);
HWY_EXPORT(head_weights_cpu);
HWY_EXPORT(norm_mix_cpu);

void split_cpu(const SplitArgs& args) {
  HWY_DYNAMIC_DISPATCH(split_cpu)(args);
}
void collapse_cpu(const CollapseArgs& args) {
  HWY_DYNAMIC_DISPATCH(collapse_cpu)(args);
}
void rms_norm_cpu(const RmsNormArgs& args) {
  HWY_DYNAMIC_DISPATCH(rms_norm_cpu)(args);
}
void split_collapse_cpu(const SplitCollapseArgs& args) {
  HWY_DYNAMIC_DISPATCH(split_collapse_cpu)(args);
}
void expand_cpu(const ExpandArgs& args) {
  HWY_DYNAMIC_DISPATCH(expand_cpu)(args);
}
void head_weights_cpu(const HeadWeightsArgs& args) {
  HWY_DYNAMIC_DISPATCH(head_weights_cpu)(args);
}
void norm_mix_cpu(const NormMixArgs& args) {
  HWY_DYNAMIC_DISPATCH(norm_mix_cpu)(args);
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
#endif  // HWY_ONCE
