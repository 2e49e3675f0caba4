#include "sharded_decode_check.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <memory>

#include "decode_cases.h"
#include "rank_threads.h"

namespace turbodecode::testing {
namespace {

constexpr std::int64_t kSlots = 3;
constexpr std::int64_t kLinearCapacity = 1536;

// The K and V rows of every position of one slot, [length, n_kv_heads, D] f32.
struct SlotTokens {
  std::vector<float> k, v;
};

// Appends positions [first, last) of `tokens` to `slot` of `cache` at positions shifted down by
// `shift`, in batches a ring can take (no two tokens of a batch on one row).
void append_span(const KvCacheView& cache, const SlotTokens& tokens, std::int32_t slot,
                 std::int32_t first, std::int32_t last, std::int32_t shift) {
  const KvCacheConfig& c = cache.config;
  const std::int64_t row = c.n_kv_heads * c.head_dim;
  for (std::int32_t from = first; from < last;) {
    const auto count = static_cast<std::int32_t>(std::min<std::int64_t>(last - from, c.capacity));
    std::vector<std::int32_t> slots(static_cast<std::size_t>(count), slot), positions;
    for (std::int32_t i = 0; i < count; ++i) positions.push_back(from + i - shift);
    const auto rows = [&](const std::vector<float>& values) {
      return to_device(c.device, values.data() + from * row, count * row * 4);
    };
    const Buffer k = rows(tokens.k), v = rows(tokens.v);
    const Buffer s = to_device(c.device, slots), p = to_device(c.device, positions);
    append_kv(cache, k.view(DType::f32, {count, c.n_kv_heads, c.head_dim}),
              v.view(DType::f32, {count, c.n_kv_heads, c.head_dim}), s.view(DType::i32, {count}),
              p.view(DType::i32, {count}));
    from += count;
  }
}

// A cache of the case's configuration on `device` with an identity block table when paged.
struct DeviceCache {
  KvCache cache;
  Buffer table;
  KvCacheView view;

  explicit DeviceCache(const KvCacheConfig& config) : cache(config) {
    if (config.page_size == 0) {
      view = cache.view();
      return;
    }
    std::vector<std::int32_t> entries(static_cast<std::size_t>(config.pages));
    for (std::size_t j = 0; j < entries.size(); ++j) entries[j] = static_cast<std::int32_t>(j);
    table = to_device(config.device, entries);
    view = cache.view(table.view(DType::i32, {config.slots, pages_per_slot(config)}));
  }
};

// One rank: its cache and its shard ranges on the device.
struct RankShare {
  RankShare(const KvCacheConfig& config, const std::vector<std::int32_t>& begin,
            const std::vector<std::int32_t>& end)
      : cache(config),
        begin_ids(to_device(config.device, begin)),
        end_ids(to_device(config.device, end)) {}

  DecodeShard shard() const {
    return {begin_ids.view(DType::i32, {kSlots}), end_ids.view(DType::i32, {kSlots})};
  }

  DeviceCache cache;
  Buffer begin_ids, end_ids;
};

std::vector<float> row_of(const std::vector<float>& values, std::int64_t row, std::int64_t size) {
  return {values.begin() + row * size, values.begin() + (row + 1) * size};
}

}  // namespace

std::string ShardCase::describe() const {
  std::string s = testing::describe(cache, options) + " lengths/cuts=";
  for (std::size_t slot = 0; slot < lengths.size(); ++slot) {
    s += std::to_string(lengths[slot]) + ":";
    for (auto cut : cuts[slot]) s += std::to_string(cut) + ",";
    s += " ";
  }
  return s;
}

std::vector<ShardCase> shard_cases(std::span<const RowFormat> k_formats,
                                   std::span<const RowFormat> v_formats, int ranks) {
  std::mt19937 design(20261203);  // fixed: the design is reproducible, the data is not
  const auto pick = [&](const auto& values) { return values[design() % std::size(values)]; };
  const auto below = [&](std::int64_t n) { return static_cast<std::int32_t>(design() % n); };
  const MaskKind masks[] = {MaskKind::causal, MaskKind::sliding_linear, MaskKind::sliding_ring};
  std::vector<ShardCase> cases;
  int index = 0;
  for (RowFormat k : k_formats) {
    for (RowFormat v : v_formats) {
      ShardCase c;
      const MaskKind mask = masks[index++ % 3];
      const bool ring = mask == MaskKind::sliding_ring;
      c.cache.slots = kSlots;
      c.cache.head_dim = pick(std::array{256, 512});
      c.cache.n_kv_heads = pick(std::array{1, 2});
      c.cache.kind = ring ? LayerKind::ring : LayerKind::linear;
      c.cache.k_format = k;
      c.cache.v_format = v;
      c.cache.capacity = ring ? pick(std::array{64, 256, 600}) : kLinearCapacity;
      c.cache.page_size = pick(std::array{0, 16, 64});
      c.cache.pages = c.cache.page_size > 0 ? kSlots * pages_per_slot(c.cache) : 0;
      c.options.n_heads = pick(std::array{1, 2, 4, 8}) * c.cache.n_kv_heads;
      c.options.mask = mask;
      c.options.query_tokens = pick(std::array{1, 1, 2, 4});
      c.options.softcap = design() % 2 ? 2.5f : 0.0f;
      c.options.rotated_output = design() % 2;
      std::int64_t window = mask == MaskKind::causal ? 0 : pick(std::array{0, 1, 100, 700});
      if (ring && c.options.query_tokens > 1) {
        if (window == 0) window = 100;
        window = std::min<std::int64_t>(window, c.cache.capacity - c.options.query_tokens + 1);
      }
      c.options.sliding_window = window;
      for (std::int64_t slot = 0; slot < kSlots; ++slot) {
        const std::int32_t length =
            c.options.query_tokens + below(ring ? 3000 : kLinearCapacity - 4);
        std::vector<std::int32_t> cuts;
        // Cuts at 0, inside the sequence before its draft, or beyond its end: a closed range
        // never ends inside a draft (run_decode rejects that).
        for (int r = 1; r < ranks; ++r) {
          const std::int32_t draft = length - c.options.query_tokens;
          cuts.push_back(pick(std::array{0, 1, 2, 2, 2, 3}) == 0 ? 0
                         : pick(std::array{0, 1, 1, 1, 1}) == 0  ? length + 5
                                                                 : below(draft + 2));
        }
        std::sort(cuts.begin(), cuts.end());
        c.lengths.push_back(length);
        c.cuts.push_back(cuts);
      }
      cases.push_back(c);
    }
  }
  return cases;
}

ShardErrors check_sharded_case(const ShardCase& c, Device device, std::uint64_t seed) {
  KvCacheConfig config = c.cache;
  config.device = device;
  const std::int64_t heads = c.options.n_heads, dim = config.head_dim;
  const std::int64_t row = config.n_kv_heads * dim;
  std::vector<SlotTokens> tokens;
  std::vector<std::int32_t> slots, positions;
  for (std::int64_t s = 0; s < kSlots; ++s) {
    const std::int32_t length = c.lengths[static_cast<std::size_t>(s)];
    tokens.push_back({gaussian(static_cast<std::size_t>(length * row), seed + 2 * s),
                      gaussian(static_cast<std::size_t>(length * row), seed + 2 * s + 1)});
    for (std::int32_t t = length - c.options.query_tokens; t < length; ++t) {
      slots.push_back(static_cast<std::int32_t>(kSlots - 1 - s));  // slots out of order
      positions.push_back(t);
    }
  }
  const auto n = static_cast<std::int64_t>(slots.size());
  const auto slot_tokens = [&](std::int32_t slot) -> const SlotTokens& {
    return tokens[static_cast<std::size_t>(kSlots - 1 - slot)];
  };
  const DecodePlan plan = plan_decode(config, c.options, n);
  const Buffer q = to_device(device, gaussian(static_cast<std::size_t>(n * heads * dim), seed - 1));
  const Buffer slot_ids = to_device(device, slots), seq_pos = to_device(device, positions);
  const auto decode_with = [&](const DecodePlan& p, const KvCacheView& cache,
                               const DecodeShard& shard, const TensorView& out,
                               const TensorView& lse) {
    Buffer workspace(device, std::max<std::int64_t>(p.workspace_bytes, 16));
    workspace.fill_bytes(0);
    run_decode(p, cache, q.view(DType::f32, {n, heads, dim}), slot_ids.view(DType::i32, {n}),
               seq_pos.view(DType::i32, {n}), shard, out, lse,
               workspace.view(DType::u8, {workspace.bytes()}));
  };
  const auto decode = [&](const KvCacheView& cache, const DecodeShard& shard, const TensorView& out,
                          const TensorView& lse) { decode_with(plan, cache, shard, out, lse); };

  // Unsharded: every slot's whole sequence in one cache.
  DeviceCache whole(config);
  for (std::int32_t slot = 0; slot < kSlots; ++slot) {
    append_span(whole.view, slot_tokens(slot), slot, 0, c.lengths[kSlots - 1 - slot], 0);
  }
  Buffer out(device, n * heads * dim * 4), lse(device, n * heads * 4);
  out.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  decode(whole.view, {}, out.view(DType::f32, {n, heads, dim}), lse.view(DType::f32, {n, heads}));
  // The same, cut into chunks of 32 positions: how far the backend's own rounding moves a
  // result when only the split of the positions changes (the floor under the sharded error).
  DecodeOptions rechunked_options = c.options;
  rechunked_options.fixed_chunk_positions = 32;
  Buffer rechunked(device, n * heads * dim * 4);
  decode_with(plan_decode(config, rechunked_options, n), whole.view, {},
              rechunked.view(DType::f32, {n, heads, dim}), {});

  // R ranks, each its own cache and shard ranges, writing into its slice of the parts.
  const int ranks = c.ranks();
  std::vector<std::unique_ptr<RankShare>> shares;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::int32_t> begin, end;
    for (std::int32_t slot = 0; slot < kSlots; ++slot) {
      const auto s = static_cast<std::size_t>(kSlots - 1 - slot);
      begin.push_back(c.begin(r, s));
      end.push_back(c.end(r, s));
    }
    shares.push_back(std::make_unique<RankShare>(config, begin, end));
    for (std::int32_t slot = 0; slot < kSlots; ++slot) {
      const auto s = static_cast<std::size_t>(kSlots - 1 - slot);
      const std::int32_t last = std::min(c.end(r, s), c.lengths[s]);
      append_span(shares.back()->cache.view, slot_tokens(slot), slot, begin[slot], last,
                  begin[slot]);
    }
  }
  Buffer parts_out(device, ranks * n * heads * dim * 4), parts_lse(device, ranks * n * heads * 4);
  parts_out.fill_bytes(0xFF);
  parts_lse.fill_bytes(0xFF);
  for (int r = 0; r < ranks; ++r) {
    decode(shares[static_cast<std::size_t>(r)]->cache.view,
           shares[static_cast<std::size_t>(r)]->shard(),
           parts_out.view(DType::f32, {n, heads, dim}, r * n * heads * dim * 4),
           parts_lse.view(DType::f32, {n, heads}, r * n * heads * 4));
  }
  Buffer merged(device, n * heads * dim * 4), merged_lse(device, n * heads * 4);
  merged.fill_bytes(0xFF);
  merged_lse.fill_bytes(0xFF);
  merge_attention(parts_out.view(DType::f32, {ranks, n, heads, dim}),
                  parts_lse.view(DType::f32, {ranks, n, heads}),
                  merged.view(DType::f32, {n, heads, dim}),
                  merged_lse.view(DType::f32, {n, heads}));

  // run_sharded_decode, rank by rank on threads of an in-process group: bitwise the above.
  const std::vector<std::unique_ptr<Communicator>> group = local_communicators(ranks, device);
  std::vector<Buffer> rank_out, rank_lse;
  for (int r = 0; r < ranks; ++r) {
    rank_out.emplace_back(device, n * heads * dim * 4);
    rank_lse.emplace_back(device, n * heads * 4);
    rank_out.back().fill_bytes(0xFF);
    rank_lse.back().fill_bytes(0xFF);
  }
  run_ranks(ranks, [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    Buffer workspace(device, sharded_decode_workspace_bytes(plan, ranks));
    workspace.fill_bytes(0);
    run_sharded_decode(plan, shares[i]->cache.view, q.view(DType::f32, {n, heads, dim}),
                       slot_ids.view(DType::i32, {n}), seq_pos.view(DType::i32, {n}),
                       shares[i]->shard(), rank_out[i].view(DType::f32, {n, heads, dim}),
                       rank_lse[i].view(DType::f32, {n, heads}),
                       workspace.view(DType::u8, {workspace.bytes()}), *group[i]);
  });
  for (int r = 0; r < ranks; ++r) {
    const auto i = static_cast<std::size_t>(r);
    EXPECT_EQ(to_host<std::uint32_t>(rank_out[i]), to_host<std::uint32_t>(merged))
        << "rank " << r << ": " << c.describe();
    EXPECT_EQ(to_host<std::uint32_t>(rank_lse[i]), to_host<std::uint32_t>(merged_lse))
        << "rank " << r << ": " << c.describe();
  }

  const std::vector<float> want = to_host<float>(out), got = to_host<float>(merged);
  const std::vector<float> resplit = to_host<float>(rechunked);
  const std::vector<float> want_lse = to_host<float>(lse), got_lse = to_host<float>(merged_lse);
  ShardErrors errors;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::vector<float> b = row_of(want, i, heads * dim);
    const std::vector<double> reference(b.begin(), b.end());
    const double error = relative_l2(row_of(got, i, heads * dim), reference);
    errors.sharded = std::max(errors.sharded, error);
    errors.rechunked =
        std::max(errors.rechunked, relative_l2(row_of(resplit, i, heads * dim), reference));
    EXPECT_LE(error, shard_tolerance(device)) << "row " << i << ": " << c.describe();
    for (std::int64_t h = 0; h < heads; ++h) {
      const float x = got_lse[static_cast<std::size_t>(i * heads + h)];
      const float y = want_lse[static_cast<std::size_t>(i * heads + h)];
      EXPECT_NEAR(x, y, 1e-6 * std::max(1.0f, std::fabs(y)))
          << "lse row " << i << " head " << h << ": " << c.describe();
    }
  }
  return errors;
}

double shard_tolerance(Device device) {
  return device == Device::cuda ? 1e-5 : 1e-6;
}

void check_shard_matrix(Device device) {
  ShardErrors worst;
  // The CPU runs 3 ranks only (its suite also runs under emulation); 3 ranks' cuts include the
  // 2-rank situations (a share that holds nothing, a cut at 0).
  const std::vector<int> rank_counts =
      device == Device::cpu ? std::vector<int>{3} : std::vector<int>{2, 3};
  for (int ranks : rank_counts) {
    for (const ShardCase& c : shard_cases(kKFormats, kVFormats, ranks)) {
      const std::uint64_t seed = fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed) + " ranks " + std::to_string(ranks));
      const ShardErrors errors = check_sharded_case(c, device, seed);
      worst.sharded = std::max(worst.sharded, errors.sharded);
      worst.rechunked = std::max(worst.rechunked, errors.rechunked);
    }
  }
  std::printf("largest relative L2 against the unsharded decode: sharded %.3g, re-chunked %.3g\n",
              worst.sharded, worst.rechunked);
}

}  // namespace turbodecode::testing
