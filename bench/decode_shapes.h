// The decode-attention benchmark shapes, one list for our benchmark and the peers
// (attention_bench --list-shapes writes them as JSON for bench/peers/*.py).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "turbodecode/tq_codec.h"

namespace turbodecode::bench {

struct DecodeShape {
  int n_heads = 16;
  int n_kv_heads = 8;
  int head_dim = 256;
  std::vector<std::int64_t> lengths;  // one per slot: the length its last query row sees
  RowFormat k_format = RowFormat::f16;
  RowFormat v_format = RowFormat::tq8;
  int page_size = 0;     // 0: contiguous cache; else a paged cache (a shuffled block table)
  int query_tokens = 1;  // query rows per slot (a draft), at the slot's last positions
  std::string set;       // which list the shape belongs to (docs/benchmarks.md)
  bool mixed = false;    // lengths differ between slots

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
    std::string s = std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) + " D" +
                    std::to_string(head_dim) + (mixed ? " mixed B=" : " B=") +
                    std::to_string(batch()) + (mixed ? " L<=" : " L=") +
                    std::to_string(max_length()) + " K " + format_name(k_format) + " V " +
                    format_name(v_format);
    if (page_size > 0) s += " P" + std::to_string(page_size);
    if (query_tokens > 1) s += " q" + std::to_string(query_tokens);
    return s;
  }
  nlohmann::json to_json() const {
    return {{"label", label()},
            {"set", set},
            {"n_heads", n_heads},
            {"n_kv_heads", n_kv_heads},
            {"head_dim", head_dim},
            {"batch", batch()},
            {"max_length", max_length()},
            {"lengths", lengths},
            {"mixed", mixed},
            {"page_size", page_size},
            {"query_tokens", query_tokens},
            {"k_format", format_name(k_format)},
            {"v_format", format_name(v_format)}};
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

struct BatchLength {
  std::int64_t batch, length;
};

// The headline batch × length shapes of each head dim.
inline std::vector<BatchLength> headline_lengths(int head_dim, bool quick) {
  if (quick) return {{1, 4096}, {8, 4096}};
  if (head_dim == 256) {
    return {{1, 4096},  {1, 8192},  {1, 16384}, {1, 32768},
            {1, 131072}, {8, 32768}, {32, 8192}, {64, 4096}};
  }
  return {{1, 4096}, {1, 32768}, {1, 131072}, {8, 32768}, {32, 8192}};
}

// The lists (each shape's `set`):
//   headline  K f16 with V tq8, f16 and tq4 (D 256) or tq8 and f16 (D 512) at every headline
//             length, a mixed batch and a skewed one (one 128K row and 31 of 4K);
//   pairs     every K × V format pair at B = 8, L = 32K (B·L = 256K tokens), both head dims;
//   fp8       K fp8 with V tq4 and tq6 at every D 256 headline shape of >= 32K tokens;
//   paged     the headline K f16 V tq8 shapes on a paged cache of 16-row pages;
//   draft     4 query tokens per slot, K f16 V tq8, B = 1 and 8 at L = 32K.
inline std::vector<DecodeShape> decode_shapes(bool quick) {
  static constexpr RowFormat kK[] = {RowFormat::f16, RowFormat::fp8, RowFormat::tq4,
                                     RowFormat::tq8};
  std::vector<DecodeShape> shapes;
  const auto add = [&](const char* set, int heads, int kv_heads, int d, BatchLength bl,
                       RowFormat k, RowFormat v, int page_size = 0, int tokens = 1) {
    DecodeShape s;
    s.set = set;
    s.n_heads = heads;
    s.n_kv_heads = kv_heads;
    s.head_dim = d;
    s.lengths.assign(static_cast<std::size_t>(bl.batch), bl.length);
    s.k_format = k;
    s.v_format = v;
    s.page_size = page_size;
    s.query_tokens = tokens;
    shapes.push_back(s);
  };
  const auto heads_of = [](int d) { return d == 256 ? 8 : 2; };
  for (int d : {256, 512}) {
    const std::vector<RowFormat> formats =
        d == 256 ? std::vector<RowFormat>{RowFormat::tq8, RowFormat::f16, RowFormat::tq4}
                 : std::vector<RowFormat>{RowFormat::tq8, RowFormat::f16};
    for (RowFormat v : formats) {
      for (BatchLength bl : headline_lengths(d, quick)) {
        add("headline", 16, heads_of(d), d, bl, RowFormat::f16, v);
      }
    }
  }
  DecodeShape mixed;
  mixed.set = "headline";
  mixed.lengths = quick ? spread_lengths(4, 1024, 8192) : spread_lengths(16, 1024, 65536);
  mixed.mixed = true;
  shapes.push_back(mixed);
  if (quick) return shapes;
  DecodeShape skewed = mixed;
  skewed.lengths.assign(31, 4096);
  skewed.lengths.insert(skewed.lengths.begin(), 131072);
  shapes.push_back(skewed);
  for (int d : {256, 512}) {
    for (RowFormat k : kK) {
      for (RowFormat v : kRowFormats) add("pairs", 16, heads_of(d), d, {8, 32768}, k, v);
    }
  }
  for (RowFormat v : {RowFormat::tq4, RowFormat::tq6}) {
    for (BatchLength bl : headline_lengths(256, false)) {
      if (bl.batch * bl.length >= 32768) add("fp8", 16, 8, 256, bl, RowFormat::fp8, v);
    }
  }
  for (int d : {256, 512}) {
    for (BatchLength bl : headline_lengths(d, false)) {
      add("paged", 16, heads_of(d), d, bl, RowFormat::f16, RowFormat::tq8, 16);
    }
  }
  for (std::int64_t batch : {1, 8}) {
    add("draft", 16, 8, 256, {batch, 32768}, RowFormat::f16, RowFormat::tq8, 0, 4);
  }
  return shapes;
}

}  // namespace turbodecode::bench
