// The decode-attention benchmark shapes, one list for our benchmark and the PyTorch peer
// (attention_bench --list-shapes writes them as JSON for bench/peers/sdpa_peer.py).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "turbodecode/tq_codec.h"

namespace turbodecode::bench {

struct DecodeShape {
  int n_heads = 16;
  int n_kv_heads = 8;
  int head_dim = 256;
  std::vector<std::int64_t> lengths;  // one per query row (= slot)
  RowFormat v_format = RowFormat::tq8;
  bool mixed = false;                   // lengths differ between rows
  RowFormat k_format = RowFormat::f16;  // TQ: the all-quantized variant

  std::int64_t batch() const { return static_cast<std::int64_t>(lengths.size()); }
  std::int64_t max_length() const {
    std::int64_t longest = 0;
    for (std::int64_t l : lengths) longest = l > longest ? l : longest;
    return longest;
  }
  std::int64_t total_length() const {
    std::int64_t sum = 0;
    for (std::int64_t l : lengths) sum += l;
    return sum;
  }
  std::string label() const {
    std::string s = std::to_string(n_heads);
    s += "/";
    s += std::to_string(n_kv_heads);
    s += " D";
    s += std::to_string(head_dim);
    s += mixed ? " mixed B=" : " B=";
    s += std::to_string(batch());
    s += mixed ? " L<=" : " L=";
    s += std::to_string(max_length());
    if (k_format != RowFormat::f16) {
      s += " K ";
      s += format_name(k_format);
      s += " V";
    }
    s += " ";
    s += format_name(v_format);
    return s;
  }
  nlohmann::json to_json() const {
    return {{"label", label()},
            {"n_heads", n_heads},
            {"n_kv_heads", n_kv_heads},
            {"head_dim", head_dim},
            {"batch", batch()},
            {"max_length", max_length()},
            {"lengths", lengths},
            {"mixed", mixed},
            {"v_format", format_name(v_format)},
            {"k_format", format_name(k_format)}};
  }
};

// Lengths spread geometrically from `shortest` to `longest` over `rows` rows (continuous
// batching: every row a different length).
inline std::vector<std::int64_t> spread_lengths(int rows, std::int64_t shortest,
                                                std::int64_t longest) {
  std::vector<std::int64_t> lengths;
  const double ratio = static_cast<double>(longest) / static_cast<double>(shortest);
  for (int i = 0; i < rows; ++i) {
    const double t = rows == 1 ? 0.0 : static_cast<double>(i) / (rows - 1);
    lengths.push_back(std::llround(static_cast<double>(shortest) * std::pow(ratio, t)));
  }
  return lengths;
}

inline std::vector<DecodeShape> decode_shapes(bool quick) {
  struct BatchLength {
    std::int64_t batch, length;
  };
  const std::vector<BatchLength> d256 =
      quick ? std::vector<BatchLength>{{1, 4096}, {8, 4096}}
            : std::vector<BatchLength>{{1, 4096},  {1, 32768}, {1, 131072},
                                       {8, 32768}, {32, 8192}, {64, 4096}};
  const std::vector<BatchLength> d512 =
      quick ? std::vector<BatchLength>{{1, 4096}}
            : std::vector<BatchLength>{{1, 4096}, {1, 32768}, {1, 131072}, {8, 32768}, {32, 8192}};
  std::vector<DecodeShape> shapes;
  const auto add = [&](int heads, int kv_heads, int d, const std::vector<BatchLength>& list,
                       std::initializer_list<RowFormat> formats) {
    for (RowFormat format : formats) {
      for (const BatchLength& bl : list) {
        shapes.push_back({heads, kv_heads, d,
                          std::vector<std::int64_t>(static_cast<std::size_t>(bl.batch), bl.length),
                          format, false});
      }
    }
  };
  add(16, 8, 256, d256, {RowFormat::tq8, RowFormat::f16, RowFormat::tq4});
  add(16, 2, 512, d512, {RowFormat::tq8, RowFormat::f16});
  shapes.push_back({16, 8, 256,
                    quick ? spread_lengths(4, 1024, 8192) : spread_lengths(16, 1024, 65536),
                    RowFormat::tq8, true});
  // The all-quantized variant (K 8-bit TQ too), at a group of 2 and of 8 query heads per KV head.
  if (!quick) {
    for (const auto& [heads, kv_heads, d] : {std::tuple{16, 8, 256}, std::tuple{16, 2, 512}}) {
      for (const std::int64_t batch : {1, 8}) {
        shapes.push_back({heads, kv_heads, d,
                          std::vector<std::int64_t>(static_cast<std::size_t>(batch), 32768),
                          RowFormat::tq8, false, RowFormat::tq8});
      }
    }
  }
  return shapes;
}

}  // namespace turbodecode::bench
