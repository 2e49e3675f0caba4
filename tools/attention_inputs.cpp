#include "attention_inputs.h"

#include <algorithm>
#include <optional>
#include <string>

#include "argument_check.h"
#include "global_options.h"
#include "tensor_files.h"
#include "turbodecode/mask_kind.h"

namespace turbodecode::cli {
namespace {

bool has_own_file(const AttentionOptions& options, const std::string& role) {
  const auto file = options.files.find(role);
  return file != options.files.end() && !file->second.empty();
}

// `from_bundle`: the role's tensor came from --inputs.
TensorArgument role_argument(const std::string& role, bool from_bundle) {
  if (from_bundle) return {"--inputs", "tensor '" + role + "': "};
  return {flag_of(role), ""};
}

// Throws InvalidArgument naming what the user typed for a role when `ok` is false.
void check_role(bool ok, const TensorArgument& role, const std::string& rule) {
  check_arg(ok, role.argument, role.prefix + rule);
}

// A tensor by role: its own flag's file, else the --inputs file's tensor of that name. Records
// in in.arguments what the user typed for it.
std::optional<HostTensor> load_role(const AttentionOptions& options, const NamedTensors& bundle,
                                    const std::string& role, bool required, StepInputs& in) {
  TensorArgument& named = in.arguments[role];
  if (has_own_file(options, role)) {
    named = role_argument(role, false);
    return read_tensor_file(options.files.at(role), role);
  }
  std::optional<HostTensor> tensor = find_tensor(bundle, role);
  named = role_argument(role, tensor.has_value());
  check_role(tensor.has_value() || !required, named,
             "is required (its own file, or a tensor '" + role + "' in --inputs)");
  return tensor;
}

// q [n, n_heads, D], k and v [tokens, n_kv_heads, D]; rank-2 tensors [rows, D] are read as one
// head: [rows, 1, D] (q: one query, [1, heads, D]). Every extent must be positive.
HostTensor rank3(HostTensor tensor, const TensorArgument& role, bool is_query) {
  check_role(tensor.shape.size() == 2 || tensor.shape.size() == 3, role,
             is_query ? "must be [n, n_heads, D] or [n_heads, D]"
                      : "must be [tokens, n_kv_heads, D] or [tokens, D]");
  if (tensor.shape.size() == 2) {
    const std::vector<std::int64_t> shape =
        is_query ? std::vector<std::int64_t>{1, tensor.shape[0], tensor.shape[1]}
                 : std::vector<std::int64_t>{tensor.shape[0], 1, tensor.shape[1]};
    tensor = reshaped(std::move(tensor), shape, role.argument);
  }
  const char* what[] = {is_query ? "queries" : "tokens", "heads", "values per head (D)"};
  for (int d = 0; d < 3; ++d) {
    check_role(tensor.shape[d] > 0, role,
               "holds no " + std::string(what[d]) + " (shape has a zero extent)");
  }
  return tensor;
}

std::vector<std::int32_t> load_indices(const AttentionOptions& options, const NamedTensors& bundle,
                                       const std::string& role, std::int64_t count,
                                       StepInputs& in) {
  const std::optional<HostTensor> tensor = load_role(options, bundle, role, false, in);
  if (!tensor) return {};
  const TensorArgument& named = in.arguments.at(role);
  std::vector<std::int32_t> values = values_as_i32(*tensor, named.argument);
  check_role(static_cast<std::int64_t>(values.size()) == count, named,
             "needs one entry per " + std::string(role.starts_with("q") ? "query" : "token") +
                 " (" + std::to_string(count) + "), has " + std::to_string(values.size()));
  for (std::size_t i = 0; i < values.size(); ++i) {
    check_role(
        values[i] >= 0, named,
        "entry " + std::to_string(i) + " is " + std::to_string(values[i]) + ", must be >= 0");
  }
  return values;
}

// Missing index arrays: all tokens in slot 0; each slot's tokens at positions 0, 1, 2, ...;
// each query in slot 0, each run of query_tokens queries at the last positions appended to its
// slot (the run's last query at the slot's last position).
void fill_default_indices(StepInputs& in, int query_tokens) {
  if (in.kv_slot.empty()) in.kv_slot.assign(static_cast<std::size_t>(in.tokens), 0);
  if (in.kv_pos.empty()) {
    std::map<std::int32_t, std::int32_t> next;
    for (std::int32_t slot : in.kv_slot) in.kv_pos.push_back(next[slot]++);
  }
  if (in.q_slot.empty()) in.q_slot.assign(static_cast<std::size_t>(in.n), 0);
  if (in.q_pos.empty()) {
    for (std::size_t i = 0; i < in.q_slot.size(); ++i) {
      std::int32_t last = -1;
      for (std::size_t t = 0; t < in.kv_slot.size(); ++t) {
        if (in.kv_slot[t] == in.q_slot[i]) last = std::max(last, in.kv_pos[t]);
      }
      const auto later_in_run = static_cast<std::int32_t>(query_tokens - 1 - i % query_tokens);
      // A slot nothing was appended to: the query check reports it.
      check_arg(last < 0 || last >= later_in_run, "--query-tokens",
                "needs each run's slot to hold at least query_tokens positions");
      in.q_pos.push_back(std::max(last - later_in_run, 0));
    }
  }
}

// The largest entry of a non-empty index array.
std::int64_t largest(const std::vector<std::int32_t>& values) {
  return *std::max_element(values.begin(), values.end());
}

}  // namespace

std::string flag_of(const std::string& role) {
  std::string flag = "--" + role;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

StepInputs load_inputs(const AttentionOptions& options) {
  const NamedTensors bundle =
      options.inputs.empty() ? NamedTensors{} : read_safetensors(options.inputs);
  StepInputs in;
  in.q = load_role(options, bundle, "q", true, in).value();
  in.k = load_role(options, bundle, "k", true, in).value();
  in.v = load_role(options, bundle, "v", true, in).value();
  const TensorArgument &q_arg = in.arguments.at("q"), &k_arg = in.arguments.at("k"),
                       &v_arg = in.arguments.at("v");
  in.q = rank3(std::move(in.q), q_arg, true);
  in.k = rank3(std::move(in.k), k_arg, false);
  in.v = rank3(std::move(in.v), v_arg, false);
  check_role(in.k.shape == in.v.shape, v_arg, "must have the shape of k [tokens, n_kv_heads, D]");
  check_role(
      in.k.shape[2] == 256 || in.k.shape[2] == 512, k_arg,
      "head dim D (the last dimension) must be 256 or 512, not " + std::to_string(in.k.shape[2]));
  check_role(in.q.shape[2] == in.k.shape[2], q_arg,
             "must have the head dim D of k (" + std::to_string(in.k.shape[2]) + ")");
  check_role(in.q.shape[1] % in.k.shape[1] == 0, q_arg,
             "its " + std::to_string(in.q.shape[1]) +
                 " heads must be a multiple of k's KV heads (" + std::to_string(in.k.shape[1]) +
                 ")");
  in.n = in.q.shape[0];
  in.tokens = in.k.shape[0];
  in.n_heads = static_cast<int>(in.q.shape[1]);
  in.n_kv_heads = static_cast<int>(in.k.shape[1]);
  in.head_dim = static_cast<int>(in.q.shape[2]);
  in.q_values = values_as_f32(in.q, q_arg.argument);
  in.k_values = values_as_f32(in.k, k_arg.argument);
  in.v_values = values_as_f32(in.v, v_arg.argument);
  in.kv_slot = load_indices(options, bundle, "kv_slot", in.tokens, in);
  in.kv_pos = load_indices(options, bundle, "kv_pos", in.tokens, in);
  in.q_slot = load_indices(options, bundle, "q_slot", in.n, in);
  in.q_pos = load_indices(options, bundle, "q_pos", in.n, in);
  check_arg(in.n % options.query_tokens == 0, "--query-tokens",
            "must divide the number of queries (" + std::to_string(in.n) + ")");
  fill_default_indices(in, options.query_tokens);
  return in;
}

MaskKind mask_kind(const AttentionOptions& options) {
  const bool ring = options.layer == "ring";
  if (options.mask.empty()) return ring ? MaskKind::sliding_ring : MaskKind::causal;
  check_arg((options.mask == "sliding-ring") == ring, "--mask",
            ring ? "a ring layer (--layer ring) takes only the sliding-ring mask"
                 : "sliding-ring needs a ring layer (--layer ring)");
  if (options.mask == "sliding-ring") return MaskKind::sliding_ring;
  if (options.mask == "sliding-linear") return MaskKind::sliding_linear;
  return MaskKind::causal;
}

KvCacheConfig cache_config(const AttentionOptions& options, const StepInputs& in) {
  KvCacheConfig config;
  config.n_kv_heads = in.n_kv_heads;
  config.head_dim = in.head_dim;
  config.kind = options.layer == "ring" ? LayerKind::ring : LayerKind::linear;
  config.k_format = parse_format(options.k_format);
  config.v_format = parse_format(options.v_format);
  config.scale_factor_d512 = options.scale_factor_d512;
  config.device = global_options().device;
  config.capacity = 1;
  const std::int64_t bytes = bytes_per_position(config);

  const TensorArgument& kv_pos = in.arguments.at("kv_pos");
  const std::int64_t last_position = largest(in.kv_pos);
  TensorArgument capacity_from = {"--capacity", ""};
  if (options.capacity > 0) {
    config.capacity = options.capacity;
  } else if (config.kind == LayerKind::ring && options.window > 0) {
    config.capacity = options.window;
    capacity_from = {"--window", ""};
  } else {
    config.capacity = last_position + 1;
    capacity_from = kv_pos;
  }
  config.slots = 1 + largest(in.kv_slot);

  // SPEC §7.1: these sizes come from flags and files, so they are bounded before they size the
  // cache. A paged cache holds whole pages: each slot's rows round up to a multiple of
  // --page-size. The slots are to blame when even one page (or position) per slot is too much.
  const std::int64_t limit = options.limits.cache_bytes;
  const std::int64_t page_rows = options.page_size > 0 ? options.page_size : 1;
  const std::int64_t slot_pages = config.capacity / page_rows + (config.capacity % page_rows != 0);
  const std::string need =
      "needs a KV cache of " + std::to_string(config.slots) + " slots x " +
      std::to_string(config.n_kv_heads) + " KV heads x " + std::to_string(config.capacity) +
      " positions" +
      (options.page_size > 0 ? " (in pages of " + std::to_string(page_rows) + ")" : "") + " x " +
      std::to_string(bytes) + " bytes, beyond the limit of " + std::to_string(limit) + " bytes";
  check_role(product_at_most({config.slots, config.n_kv_heads, page_rows, bytes}, limit),
             in.arguments.at("kv_slot"), "slot " + std::to_string(config.slots - 1) + " " + need);
  check_role(
      product_at_most({config.slots, config.n_kv_heads, slot_pages, page_rows, bytes}, limit),
      capacity_from, need);
  check_role(config.kind == LayerKind::ring || last_position < config.capacity, kv_pos,
             "position " + std::to_string(last_position) + " does not fit a linear cache of " +
                 std::to_string(config.capacity) + " positions (--capacity)");
  if (options.page_size > 0) {
    config.page_size = options.page_size;
    config.pages = config.slots * pages_per_slot(config);
  }
  return config;
}

std::int64_t row_of(const KvCacheConfig& config, std::int64_t position) {
  return config.kind == LayerKind::ring ? position % config.capacity : position;
}

RowOwners row_owners(const KvCacheConfig& config, const StepInputs& in) {
  RowOwners owners;
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    owners[{in.kv_slot[t], row_of(config, in.kv_pos[t])}] = t;
  }
  return owners;
}

void check_queries_see_appended_rows(const StepInputs& in, const KvCacheConfig& config,
                                     const DecodeOptions& decode, const RowOwners& owners) {
  // The positions each slot's rows hold, ascending.
  std::map<std::int64_t, std::vector<std::int64_t>> held;
  for (const auto& [row, token] : owners) held[row.first].push_back(in.kv_pos[token]);
  for (auto& entry : held) std::sort(entry.second.begin(), entry.second.end());

  for (std::int64_t i = 0; i < in.n; ++i) {
    const std::int64_t slot = in.q_slot[i], position = in.q_pos[i];
    const std::string query = "query " + std::to_string(i) + " (slot " + std::to_string(slot) +
                              ", position " + std::to_string(position) + ")";
    const auto slot_rows = held.find(slot);
    check_role(slot_rows != held.end(), in.arguments.at("q_slot"),
               query + ": no token was appended to slot " + std::to_string(slot));
    const std::vector<std::int64_t>& positions = slot_rows->second;
    const std::int64_t first =
        visible_positions(decode.mask, position, config.capacity, decode.sliding_window).first;
    // Held positions are distinct, so the query sees only held rows when [first, position]
    // holds exactly position - first + 1 of them.
    auto it = std::lower_bound(positions.begin(), positions.end(), first);
    const auto end = std::upper_bound(positions.begin(), positions.end(), position);
    if (end - it == position - first + 1) continue;
    std::int64_t missing = first;
    for (; it != end && *it == missing; ++it) ++missing;
    const auto owner = owners.find({slot, row_of(config, missing)});
    check_role(
        false, in.arguments.at("q_pos"),
        query + " sees position " + std::to_string(missing) + ", " +
            (owner == owners.end() ? "which was never appended to slot " + std::to_string(slot)
                                   : "whose cache row holds position " +
                                         std::to_string(in.kv_pos[owner->second]) + " instead"));
  }
}

}  // namespace turbodecode::cli
