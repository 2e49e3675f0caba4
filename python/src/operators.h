// Every torch.ops.turbodecode operator: its schema, and its body over an argument adapter, so
// that the nanobind extension (ArrayArgs: any Python array) and the torch operator library
// (TensorArgs: at::Tensor, python/torch_ops/) run the same code. An adapter names its argument
// types (Array, OptionalArray), turns them into TensorViews (input, output, optional_input,
// optional_output) and runs the library call on the arrays' device and stream (run).
// Configurations arrive as keys (keys.h).
#pragma once

#include <cstdint>
#include <string>

#include "keys.h"
#include "turbodecode/attention.h"
#include "turbodecode/hc.h"
#include "turbodecode/kv_cache.h"
#include "turbodecode/q8.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::python {

struct OperatorSchema {
  const char* name;
  const char* arguments;  // the schema after the name; (x!) marks what the operator writes
};

// The operators return nothing and write the arguments marked (x!).
inline constexpr OperatorSchema kOperatorSchemas[] = {
    {"append_kv",
     "(str cache, Tensor(a!) k_cache, Tensor(b!)? k_norms, Tensor(c!) v_cache, "
     "Tensor(d!)? v_norms, Tensor? block_table, Tensor k, Tensor v, Tensor slot_ids, "
     "Tensor positions) -> ()"},
    {"run_decode",
     "(str plan, Tensor k_cache, Tensor? k_norms, Tensor v_cache, Tensor? v_norms, "
     "Tensor? block_table, Tensor q, Tensor slot_ids, Tensor seq_pos, Tensor(a!) out, "
     "Tensor(b!)? lse, Tensor(c!) workspace) -> ()"},
    {"encode_rows",
     "(int head_dim, str format, float scale_factor_d512, Tensor x, Tensor(a!) codes, "
     "Tensor(b!) norms) -> ()"},
    {"decode_rows",
     "(int head_dim, str format, float scale_factor_d512, Tensor codes, Tensor norms, "
     "Tensor(a!) y) -> ()"},
    {"rotate_rows", "(int head_dim, Tensor x, Tensor(a!) y) -> ()"},
    {"unrotate_rows", "(int head_dim, Tensor y, Tensor(a!) x) -> ()"},
    {"hc_split", "(str params, Tensor mix, Tensor scale, Tensor base, Tensor(a!) split) -> ()"},
    {"hc_collapse", "(str params, Tensor x, Tensor pre, Tensor(a!) out) -> ()"},
    {"hc_rms_norm", "(str params, Tensor u, Tensor weight, Tensor(a!) out) -> ()"},
    {"hc_split_collapse",
     "(str params, Tensor mix, Tensor scale, Tensor base, Tensor x, Tensor(a!) split, "
     "Tensor(b!) collapsed) -> ()"},
    {"hc_split_collapse_norm",
     "(str params, Tensor mix, Tensor scale, Tensor base, Tensor x, Tensor norm_weight, "
     "Tensor(a!) split, Tensor(b!) collapsed, Tensor(c!) normed) -> ()"},
    {"hc_expand",
     "(str params, Tensor block, Tensor? add, Tensor x, Tensor post, Tensor comb, "
     "Tensor(a!) out) -> ()"},
    {"hc_head_weights",
     "(str params, float post_scale, Tensor logits, Tensor scale, Tensor base, "
     "Tensor(a!) weights) -> ()"},
    {"hc_norm_mix",
     "(str plan, Tensor x, Tensor mix_weight, Tensor(a!) mix, Tensor(b!)? workspace) -> ()"},
    {"hc_pre",
     "(str plan, Tensor x, Tensor mix_weight, Tensor scale, Tensor base, Tensor norm_weight, "
     "Tensor(a!) mix, Tensor(b!) split, Tensor(c!) collapsed, Tensor(d!) normed, "
     "Tensor(e!)? workspace) -> ()"},
    {"hc_expand_q8",
     "(str params, Tensor weight, Tensor input, Tensor(a!) block, Tensor x, Tensor post, "
     "Tensor comb, Tensor(b!) out) -> ()"},
    {"hc_expand_shared_q8",
     "(str params, Tensor weight, Tensor input, Tensor routed, Tensor(a!) shared, Tensor x, "
     "Tensor post, Tensor comb, Tensor(b!) out) -> ()"},
    {"quantize_q8_0", "(Tensor src, Tensor(a!) dst) -> ()"},
    {"q8_matvec", "(Tensor weight, Tensor input, Tensor(a!) out) -> ()"},
};

namespace ops {

template <class A>
using Array = typename A::Array;
template <class A>
using OptionalArray = typename A::OptionalArray;

// The cache's storage arrays; append_kv writes them, run_decode reads them.
template <class A>
KvCacheView cache_arrays(A& a, const KvCacheConfig& config, Array<A> k, OptionalArray<A> k_norms,
                         Array<A> v, OptionalArray<A> v_norms, OptionalArray<A> block_table,
                         bool written) {
  auto rows = [&](Array<A> array, const char* name) {
    return written ? a.output(array, name) : a.input(array, name);
  };
  auto side_values = [&](OptionalArray<A> array, const char* name) {
    return written ? a.optional_output(array, name) : a.optional_input(array, name);
  };
  return {config,
          rows(k, "cache.k"),
          side_values(k_norms, "cache.k_norms"),
          rows(v, "cache.v"),
          side_values(v_norms, "cache.v_norms"),
          a.optional_input(block_table, "cache.block_table")};
}

template <class A>
void append_kv(const std::string& cache, Array<A> k_cache, OptionalArray<A> k_norms,
               Array<A> v_cache, OptionalArray<A> v_norms, OptionalArray<A> block_table, Array<A> k,
               Array<A> v, Array<A> slot_ids, Array<A> positions) {
  const auto config = cache_config(cache, "cache");
  A a;
  const KvCacheView view =
      cache_arrays(a, *config, k_cache, k_norms, v_cache, v_norms, block_table, true);
  const TensorView kk = a.input(k, "k"), vv = a.input(v, "v"),
                   slots = a.input(slot_ids, "slot_ids"), pos = a.input(positions, "positions");
  a.run([&](Stream stream) { turbodecode::append_kv(view, kk, vv, slots, pos, stream); });
}

template <class A>
void run_decode(const std::string& plan, Array<A> k_cache, OptionalArray<A> k_norms,
                Array<A> v_cache, OptionalArray<A> v_norms, OptionalArray<A> block_table,
                Array<A> q, Array<A> slot_ids, Array<A> seq_pos, Array<A> out, OptionalArray<A> lse,
                Array<A> workspace) {
  const auto p = decode_plan(plan, "plan");
  A a;
  const KvCacheView cache =
      cache_arrays(a, p->cache, k_cache, k_norms, v_cache, v_norms, block_table, false);
  const TensorView qq = a.input(q, "q"), slots = a.input(slot_ids, "slot_ids"),
                   pos = a.input(seq_pos, "seq_pos"), o = a.output(out, "out"),
                   l = a.optional_output(lse, "lse"), w = a.output(workspace, "workspace");
  a.run(
      [&](Stream stream) { turbodecode::run_decode(*p, cache, qq, slots, pos, o, l, w, stream); });
}

inline CodecParams codec_params(std::int64_t head_dim, const std::string& format,
                                double scale_factor_d512) {
  return {static_cast<int>(head_dim), parse_format(format), static_cast<float>(scale_factor_d512)};
}

template <class A>
void encode_rows(std::int64_t head_dim, const std::string& format, double scale_factor_d512,
                 Array<A> x, Array<A> codes, Array<A> norms) {
  const CodecParams params = codec_params(head_dim, format, scale_factor_d512);
  A a;
  const TensorView xx = a.input(x, "x"), c = a.output(codes, "codes"), n = a.output(norms, "norms");
  a.run([&](Stream stream) { turbodecode::encode_rows(params, xx, c, n, stream); });
}

template <class A>
void decode_rows(std::int64_t head_dim, const std::string& format, double scale_factor_d512,
                 Array<A> codes, Array<A> norms, Array<A> y) {
  const CodecParams params = codec_params(head_dim, format, scale_factor_d512);
  A a;
  const TensorView c = a.input(codes, "codes"), n = a.input(norms, "norms"), yy = a.output(y, "y");
  a.run([&](Stream stream) { turbodecode::decode_rows(params, c, n, yy, stream); });
}

template <class A>
void rotate_rows(std::int64_t head_dim, Array<A> x, Array<A> y) {
  A a;
  const TensorView xx = a.input(x, "x"), yy = a.output(y, "y");
  a.run(
      [&](Stream stream) { turbodecode::rotate_rows(static_cast<int>(head_dim), xx, yy, stream); });
}

template <class A>
void unrotate_rows(std::int64_t head_dim, Array<A> y, Array<A> x) {
  A a;
  const TensorView yy = a.input(y, "y"), xx = a.output(x, "x");
  a.run([&](Stream stream) {
    turbodecode::unrotate_rows(static_cast<int>(head_dim), yy, xx, stream);
  });
}

template <class A>
void hc_split(const std::string& params, Array<A> mix, Array<A> scale, Array<A> base,
              Array<A> split) {
  const auto p = hc_params(params, "params");
  A a;
  const TensorView m = a.input(mix, "mix"), s = a.input(scale, "scale"), b = a.input(base, "base"),
                   out = a.output(split, "split");
  a.run([&](Stream stream) { turbodecode::hc_split(*p, m, s, b, out, stream); });
}

template <class A>
void hc_collapse(const std::string& params, Array<A> x, Array<A> pre, Array<A> out) {
  const auto p = hc_params(params, "params");
  A a;
  const TensorView xx = a.input(x, "x"), pp = a.input(pre, "pre"), o = a.output(out, "out");
  a.run([&](Stream stream) { turbodecode::hc_collapse(*p, xx, pp, o, stream); });
}

template <class A>
void hc_rms_norm(const std::string& params, Array<A> u, Array<A> weight, Array<A> out) {
  const auto p = hc_params(params, "params");
  A a;
  const TensorView uu = a.input(u, "u"), w = a.input(weight, "weight"), o = a.output(out, "out");
  a.run([&](Stream stream) { turbodecode::hc_rms_norm(*p, uu, w, o, stream); });
}

template <class A>
void hc_split_collapse(const std::string& params, Array<A> mix, Array<A> scale, Array<A> base,
                       Array<A> x, Array<A> split, Array<A> collapsed) {
  const auto p = hc_params(params, "params");
  A a;
  const TensorView m = a.input(mix, "mix"), s = a.input(scale, "scale"), b = a.input(base, "base"),
                   xx = a.input(x, "x"), sp = a.output(split, "split"),
                   c = a.output(collapsed, "collapsed");
  a.run([&](Stream stream) { turbodecode::hc_split_collapse(*p, m, s, b, xx, sp, c, stream); });
}

template <class A>
void hc_split_collapse_norm(const std::string& params, Array<A> mix, Array<A> scale, Array<A> base,
                            Array<A> x, Array<A> norm_weight, Array<A> split, Array<A> collapsed,
                            Array<A> normed) {
  const auto p = hc_params(params, "params");
  A a;
  const TensorView m = a.input(mix, "mix"), s = a.input(scale, "scale"), b = a.input(base, "base"),
                   xx = a.input(x, "x"), w = a.input(norm_weight, "norm_weight"),
                   sp = a.output(split, "split"), c = a.output(collapsed, "collapsed"),
                   n = a.output(normed, "normed");
  a.run([&](Stream stream) {
    turbodecode::hc_split_collapse_norm(*p, m, s, b, xx, w, sp, c, n, stream);
  });
}

template <class A>
void hc_expand(const std::string& params, Array<A> block, OptionalArray<A> add, Array<A> x,
               Array<A> post, Array<A> comb, Array<A> out) {
  const auto p = hc_params(params, "params");
  A a;
  const TensorView bl = a.input(block, "block"), ad = a.optional_input(add, "add"),
                   xx = a.input(x, "x"), po = a.input(post, "post"), co = a.input(comb, "comb"),
                   o = a.output(out, "out");
  a.run([&](Stream stream) { turbodecode::hc_expand(*p, bl, ad, xx, po, co, o, stream); });
}

template <class A>
void hc_head_weights(const std::string& params, double post_scale, Array<A> logits, Array<A> scale,
                     Array<A> base, Array<A> weights) {
  const auto p = hc_params(params, "params");
  A a;
  const TensorView l = a.input(logits, "logits"), s = a.input(scale, "scale"),
                   b = a.input(base, "base"), w = a.output(weights, "weights");
  a.run([&](Stream stream) {
    turbodecode::hc_head_weights(*p, static_cast<float>(post_scale), l, s, b, w, stream);
  });
}

template <class A>
void hc_norm_mix(const std::string& plan, Array<A> x, Array<A> mix_weight, Array<A> mix,
                 OptionalArray<A> workspace) {
  const auto p = hc_pre_plan(plan, "plan");
  A a;
  const TensorView xx = a.input(x, "x"), w = a.input(mix_weight, "mix_weight"),
                   m = a.output(mix, "mix"), ws = a.optional_output(workspace, "workspace");
  a.run([&](Stream stream) { turbodecode::hc_norm_mix(*p, xx, w, m, ws, stream); });
}

template <class A>
void hc_pre(const std::string& plan, Array<A> x, Array<A> mix_weight, Array<A> scale, Array<A> base,
            Array<A> norm_weight, Array<A> mix, Array<A> split, Array<A> collapsed, Array<A> normed,
            OptionalArray<A> workspace) {
  const auto p = hc_pre_plan(plan, "plan");
  A a;
  const TensorView xx = a.input(x, "x"), w = a.input(mix_weight, "mix_weight"),
                   s = a.input(scale, "scale"), b = a.input(base, "base"),
                   nw = a.input(norm_weight, "norm_weight"), m = a.output(mix, "mix"),
                   sp = a.output(split, "split"), c = a.output(collapsed, "collapsed"),
                   n = a.output(normed, "normed"), ws = a.optional_output(workspace, "workspace");
  a.run([&](Stream stream) { turbodecode::hc_pre(*p, xx, w, s, b, nw, m, sp, c, n, ws, stream); });
}

template <class A>
void hc_expand_q8(const std::string& params, Array<A> weight, Array<A> input, Array<A> block,
                  Array<A> x, Array<A> post, Array<A> comb, Array<A> out) {
  const auto p = hc_params(params, "params");
  A a;
  const TensorView w = a.input(weight, "weight"), in = a.input(input, "input"),
                   bl = a.output(block, "block"), xx = a.input(x, "x"), po = a.input(post, "post"),
                   co = a.input(comb, "comb"), o = a.output(out, "out");
  a.run([&](Stream stream) { turbodecode::hc_expand_q8(*p, w, in, bl, xx, po, co, o, stream); });
}

template <class A>
void hc_expand_shared_q8(const std::string& params, Array<A> weight, Array<A> input,
                         Array<A> routed, Array<A> shared, Array<A> x, Array<A> post, Array<A> comb,
                         Array<A> out) {
  const auto p = hc_params(params, "params");
  A a;
  const TensorView w = a.input(weight, "weight"), in = a.input(input, "input"),
                   r = a.input(routed, "routed"), sh = a.output(shared, "shared"),
                   xx = a.input(x, "x"), po = a.input(post, "post"), co = a.input(comb, "comb"),
                   o = a.output(out, "out");
  a.run([&](Stream stream) {
    turbodecode::hc_expand_shared_q8(*p, w, in, r, sh, xx, po, co, o, stream);
  });
}

template <class A>
void quantize_q8_0(Array<A> src, Array<A> dst) {
  A a;
  const TensorView s = a.input(src, "src"), d = a.output(dst, "dst");
  a.run([&](Stream) { turbodecode::quantize_q8_0(s, d); });
}

template <class A>
void q8_matvec(Array<A> weight, Array<A> input, Array<A> out) {
  A a;
  const TensorView w = a.input(weight, "weight"), in = a.input(input, "input"),
                   o = a.output(out, "out");
  a.run([&](Stream stream) { turbodecode::q8_matvec(w, in, o, stream); });
}

}  // namespace ops
}  // namespace turbodecode::python
