// `turbodecode attention`: one decode step on user tensors. Appends K/V to a cache built with
// the chosen formats and layer kind, runs decode attention for the queries, writes the output
// and compares it with exact attention on the unquantized K/V.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "common/validate.h"
#include "device_tensor.h"
#include "fidelity.h"
#include "global_options.h"
#include "reference/attention_oracle.h"
#include "tensor_files.h"
#include "turbodecode/attention.h"
#include "turbodecode/kv_cache.h"
#include "visible_positions.h"

namespace turbodecode::cli {
namespace {

struct AttentionOptions {
  std::string inputs;
  std::map<std::string, std::string> files;  // tensor role -> file given by its own flag
  std::string v_format = "tq8";
  std::string k_format = "f16";
  std::string layer = "linear";
  std::string mask;
  std::int64_t window = 0;
  std::int64_t capacity = 0;
  float scale = 0.0f;
  float softcap = 0.0f;
  float scale_factor_d512 = 1.0f;
  bool rotated_output = false;
  int query_tokens = 1;
  int page_size = 0;
  std::string output;
  std::string lse;
};

// The step's tensors: q [n, n_heads, D]; k, v [T, n_kv_heads, D] (file dtype); index arrays.
struct StepInputs {
  HostTensor q, k, v;
  std::vector<float> q_values, k_values, v_values;
  std::vector<std::int32_t> kv_slot, kv_pos, q_slot, q_pos;
  std::int64_t n = 0, tokens = 0;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

// A tensor by role: its own flag's file, else the --inputs file's tensor of that name.
std::optional<HostTensor> load_role(const AttentionOptions& options, const NamedTensors& bundle,
                                    const std::string& role, bool required) {
  if (const auto file = options.files.find(role);
      file != options.files.end() && !file->second.empty()) {
    return read_tensor_file(file->second, role);
  }
  std::optional<HostTensor> tensor = find_tensor(bundle, role);
  check_arg(tensor.has_value() || !required, "--" + role,
            "is required (its own file, or a tensor '" + role + "' in --inputs)");
  return tensor;
}

// Rank-2 tensors [rows, D] are read as one head: [rows, 1, D] (q: one query, [1, heads, D]).
HostTensor rank3(HostTensor tensor, const std::string& role, bool is_query) {
  check_arg(tensor.shape.size() == 2 || tensor.shape.size() == 3, role,
            "must be [rows, heads, D] or [rows, D]");
  if (tensor.shape.size() == 3) return tensor;
  const std::vector<std::int64_t> shape =
      is_query ? std::vector<std::int64_t>{1, tensor.shape[0], tensor.shape[1]}
               : std::vector<std::int64_t>{tensor.shape[0], 1, tensor.shape[1]};
  return reshaped(std::move(tensor), shape, role);
}

std::vector<std::int32_t> load_indices(const AttentionOptions& options, const NamedTensors& bundle,
                                       const std::string& role, std::int64_t count) {
  const std::optional<HostTensor> tensor = load_role(options, bundle, role, false);
  if (!tensor) return {};
  std::vector<std::int32_t> values = values_as_i32(*tensor, role);
  check_arg(static_cast<std::int64_t>(values.size()) == count, role,
            "needs one entry per " + std::string(role.starts_with("q") ? "query" : "token"));
  for (std::int32_t value : values) check_arg(value >= 0, role, "entries must be >= 0");
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
      check_arg(last >= 0, "q_slot", "names a slot no token was appended to");
      const auto later_in_run = static_cast<std::int32_t>(query_tokens - 1 - i % query_tokens);
      check_arg(last >= later_in_run, "--query-tokens",
                "needs each run's slot to hold at least query_tokens positions");
      in.q_pos.push_back(last - later_in_run);
    }
  }
}

StepInputs load_inputs(const AttentionOptions& options) {
  const NamedTensors bundle =
      options.inputs.empty() ? NamedTensors{} : read_safetensors(options.inputs);
  StepInputs in;
  in.q = rank3(*load_role(options, bundle, "q", true), "q", true);
  in.k = rank3(*load_role(options, bundle, "k", true), "k", false);
  in.v = rank3(*load_role(options, bundle, "v", true), "v", false);
  check_arg(in.k.shape == in.v.shape, "v", "must have the shape of k [tokens, n_kv_heads, D]");
  check_arg(in.q.shape[2] == in.k.shape[2], "q", "must have the head dim D of k");
  in.n = in.q.shape[0];
  in.tokens = in.k.shape[0];
  in.n_heads = static_cast<int>(in.q.shape[1]);
  in.n_kv_heads = static_cast<int>(in.k.shape[1]);
  in.head_dim = static_cast<int>(in.q.shape[2]);
  in.q_values = values_as_f32(in.q, "q");
  in.k_values = values_as_f32(in.k, "k");
  in.v_values = values_as_f32(in.v, "v");
  in.kv_slot = load_indices(options, bundle, "kv_slot", in.tokens);
  in.kv_pos = load_indices(options, bundle, "kv_pos", in.tokens);
  in.q_slot = load_indices(options, bundle, "q_slot", in.n);
  in.q_pos = load_indices(options, bundle, "q_pos", in.n);
  check_arg(in.n % options.query_tokens == 0, "--query-tokens",
            "must divide the number of queries (" + std::to_string(in.n) + ")");
  fill_default_indices(in, options.query_tokens);
  return in;
}

MaskKind mask_kind(const AttentionOptions& options, LayerKind layer) {
  if (options.mask.empty())
    return layer == LayerKind::ring ? MaskKind::sliding_ring : MaskKind::causal;
  if (options.mask == "sliding-ring") return MaskKind::sliding_ring;
  if (options.mask == "sliding-linear") return MaskKind::sliding_linear;
  return MaskKind::causal;
}

KvCacheConfig cache_config(const AttentionOptions& options, const StepInputs& in) {
  KvCacheConfig config;
  config.slots = 1 + std::max(*std::max_element(in.kv_slot.begin(), in.kv_slot.end()),
                              *std::max_element(in.q_slot.begin(), in.q_slot.end()));
  config.n_kv_heads = in.n_kv_heads;
  config.head_dim = in.head_dim;
  config.kind = options.layer == "ring" ? LayerKind::ring : LayerKind::linear;
  const std::int64_t last = std::max(*std::max_element(in.kv_pos.begin(), in.kv_pos.end()),
                                     *std::max_element(in.q_pos.begin(), in.q_pos.end()));
  config.capacity = options.capacity > 0                                   ? options.capacity
                    : config.kind == LayerKind::ring && options.window > 0 ? options.window
                                                                           : last + 1;
  config.k_format = parse_format(options.k_format);
  config.v_format = parse_format(options.v_format);
  config.scale_factor_d512 = options.scale_factor_d512;
  config.device = global_options().device;
  if (options.page_size > 0) {
    config.page_size = options.page_size;
    config.pages = config.slots * pages_per_slot(config);
  }
  return config;
}

// The step's cache: contiguous, or paged through a block table that hands every slot its pages
// in a random order (seeded by --seed).
class StepCache {
 public:
  explicit StepCache(const KvCacheConfig& config) : storage_(config) {
    if (config.page_size == 0) return;
    std::vector<std::int32_t> pages(static_cast<std::size_t>(config.pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), std::mt19937_64(global_options().seed));
    table_.emplace(config.device, DType::i32,
                   std::vector<std::int64_t>{config.slots, pages_per_slot(config)}, pages);
  }
  KvCacheView view() const { return table_ ? storage_.view(table_->view()) : storage_.view(); }

 private:
  KvCache storage_;
  std::optional<DeviceTensor> table_;
};

// A cache row of one slot, and which appended token wrote each row last.
using CacheRow = std::pair<std::int64_t, std::int64_t>;
using RowOwners = std::map<CacheRow, std::int64_t>;

std::int64_t row_of(const KvCacheConfig& config, std::int64_t position) {
  return config.kind == LayerKind::ring ? position % config.capacity : position;
}

// Appends every token in file order, cutting a new batch wherever a (slot, row) would repeat
// (one call may not write a row twice). Returns, per (slot, row), the token that wrote it last.
RowOwners append_all(const KvCacheView& cache, const StepInputs& in) {
  const KvCacheConfig& config = cache.config;
  const Device device = config.device;
  const DeviceTensor k(device, in.k), v(device, in.v);
  const DeviceTensor slots(device, DType::i32, {in.tokens}, in.kv_slot);
  const DeviceTensor positions(device, DType::i32, {in.tokens}, in.kv_pos);
  RowOwners owner;
  std::int64_t batch_start = 0;
  std::set<CacheRow> in_batch;
  const auto flush = [&](std::int64_t end) {
    if (end == batch_start) return;
    const std::int64_t count = end - batch_start;
    append_kv(cache, k.rows(batch_start, count), v.rows(batch_start, count),
              slots.rows(batch_start, count), positions.rows(batch_start, count));
    batch_start = end;
    in_batch.clear();
  };
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    const CacheRow key{in.kv_slot[t], row_of(config, in.kv_pos[t])};
    if (in_batch.count(key)) flush(t);
    in_batch.insert(key);
    owner[key] = t;
  }
  flush(in.tokens);
  synchronize();
  return owner;
}

// Exact attention of query i over the unquantized K/V of the positions it sees; nullopt when
// the cache row of a visible position does not hold that position's token (never appended,
// or overwritten), since the exact result is then undefined.
std::optional<std::vector<double>> exact_for_query(const StepInputs& in,
                                                   const KvCacheConfig& config,
                                                   const DecodeOptions& options,
                                                   const RowOwners& owners, std::int64_t i) {
  const std::int64_t position = in.q_pos[i];
  const std::int64_t first =
      first_visible_position(options.mask, position, config.capacity, options.sliding_window);
  const std::size_t row_values = static_cast<std::size_t>(in.n_kv_heads) * in.head_dim;
  std::vector<float> k, v;
  for (std::int64_t p = first; p <= position; ++p) {
    const auto owner = owners.find({in.q_slot[i], row_of(config, p)});
    if (owner == owners.end() || in.kv_pos[owner->second] != p) return std::nullopt;
    const auto at = static_cast<std::ptrdiff_t>(owner->second * row_values);
    k.insert(k.end(), in.k_values.begin() + at, in.k_values.begin() + at + row_values);
    v.insert(v.end(), in.v_values.begin() + at, in.v_values.begin() + at + row_values);
  }
  const std::size_t query_values = static_cast<std::size_t>(in.n_heads) * in.head_dim;
  const auto q_at = in.q_values.begin() + static_cast<std::ptrdiff_t>(i * query_values);
  return oracle::exact_attention({q_at, q_at + static_cast<std::ptrdiff_t>(query_values)}, k, v,
                                 in.n_heads, in.n_kv_heads, in.head_dim, options.scale,
                                 options.softcap);
}

struct StepResult {
  KvCacheConfig cache;        // the cache the step ran on
  std::vector<float> out;     // as run_decode returned it
  std::vector<float> lse;     // [n, n_heads], when asked for
  std::vector<double> exact;  // [n, n_heads, D], when every query has an exact reference
  Fidelity fidelity;
};

StepResult run_step(const AttentionOptions& cli, const StepInputs& in) {
  const KvCacheConfig config = cache_config(cli, in);
  DecodeOptions options;
  options.n_heads = in.n_heads;
  options.scale = cli.scale;
  options.softcap = cli.softcap;
  options.mask = mask_kind(cli, config.kind);
  options.sliding_window = cli.window;
  options.rotated_output = cli.rotated_output;
  options.query_tokens = cli.query_tokens;
  const DecodePlan plan = plan_decode(config, options, in.n);

  const StepCache cache(config);
  const RowOwners owners = append_all(cache.view(), in);
  const DeviceTensor q(config.device, DType::f32, {in.n, in.n_heads, in.head_dim}, in.q_values);
  const DeviceTensor slots(config.device, DType::i32, {in.n}, in.q_slot);
  const DeviceTensor positions(config.device, DType::i32, {in.n}, in.q_pos);
  const DeviceTensor out(config.device, DType::f32, {in.n, in.n_heads, in.head_dim});
  const std::optional<DeviceTensor> lse =
      cli.lse.empty() ? std::nullopt
                      : std::optional<DeviceTensor>(std::in_place, config.device, DType::f32,
                                                    std::vector<std::int64_t>{in.n, in.n_heads});
  const DeviceTensor workspace(config.device, DType::u8,
                               {std::max<std::int64_t>(plan.workspace_bytes, 1)});
  run_decode(plan, cache.view(), q.view(), slots.view(), positions.view(), out.view(),
             lse ? lse->view() : TensorView{}, workspace.view());
  synchronize();

  StepResult result{config,
                    out.to_host_values<float>(),
                    lse ? lse->to_host_values<float>() : std::vector<float>{},
                    {},
                    {}};
  // The exact reference is in the original basis; compare a rotated result after undoing R_D.
  std::vector<float> comparable = result.out;
  if (options.rotated_output && is_turboquant(config.v_format)) {
    const TensorView rows =
        TensorView::contiguous(comparable.data(), DType::f32, {in.n * in.n_heads, in.head_dim});
    unrotate_rows(in.head_dim, rows, rows);
  }
  for (std::int64_t i = 0; i < in.n; ++i) {
    const std::optional<std::vector<double>> exact =
        exact_for_query(in, config, options, owners, i);
    if (!exact) {
      result.exact.clear();
      result.fidelity = Fidelity{};
      break;
    }
    result.exact.insert(result.exact.end(), exact->begin(), exact->end());
    result.fidelity.add_rows(comparable.data() + i * in.n_heads * in.head_dim, exact->data(),
                             in.n_heads, in.head_dim);
  }
  return result;
}

void report(const AttentionOptions& cli, const StepInputs& in, const StepResult& result) {
  const bool has_exact = !result.exact.empty();
  if (global_options().json) {
    nlohmann::ordered_json json = {{"device", device_name(global_options().device)},
                                   {"queries", in.n},
                                   {"tokens", in.tokens},
                                   {"n_heads", in.n_heads},
                                   {"n_kv_heads", in.n_kv_heads},
                                   {"head_dim", in.head_dim},
                                   {"k_format", cli.k_format},
                                   {"v_format", cli.v_format},
                                   {"layer", cli.layer},
                                   {"query_tokens", cli.query_tokens},
                                   {"capacity", result.cache.capacity},
                                   {"page_size", result.cache.page_size},
                                   {"pages", result.cache.pages},
                                   {"output", cli.output}};
    if (has_exact) {
      json["cosine_mean"] = result.fidelity.mean_cosine();
      json["cosine_min"] = result.fidelity.min_cosine();
      json["max_relative_error"] = result.fidelity.max_relative_error();
    }
    fmt::print("{}\n", json.dump(2));
    return;
  }
  fmt::print(
      "decode step ({}): {} queries x {} heads over {} appended tokens, {} KV heads, D {}, "
      "K {} / V {}, {} layer\n",
      device_name(global_options().device), in.n, in.n_heads, in.tokens, in.n_kv_heads, in.head_dim,
      cli.k_format, cli.v_format, cli.layer);
  if (has_exact) {
    fmt::print(
        "vs exact attention (unquantized K/V): cosine mean {:.6f}, min {:.6f}, max rel err "
        "{:.3e}\n",
        result.fidelity.mean_cosine(), result.fidelity.min_cosine(),
        result.fidelity.max_relative_error());
  } else {
    fmt::print(
        "vs exact attention: skipped (a query sees a cache row that does not hold the token "
        "of its position)\n");
  }
  if (!cli.output.empty()) fmt::print("output written to {}\n", cli.output);
  if (!cli.lse.empty()) fmt::print("lse written to {}\n", cli.lse);
}

void write_output(const std::string& path, const StepInputs& in, const StepResult& result) {
  const std::vector<std::int64_t> shape = {in.n, in.n_heads, in.head_dim};
  NamedTensors tensors;
  tensors.emplace_back("out", HostTensor::copy_of(result.out.data(), DType::f32, shape));
  if (path.ends_with(".safetensors") && !result.exact.empty()) {
    const std::vector<float> exact(result.exact.begin(), result.exact.end());
    tensors.emplace_back("exact", HostTensor::copy_of(exact.data(), DType::f32, shape));
  }
  write_tensor_file(path, tensors);
}

void run_attention(const AttentionOptions& options) {
  const StepInputs in = load_inputs(options);
  const StepResult result = run_step(options, in);
  if (!options.output.empty()) write_output(options.output, in, result);
  if (!options.lse.empty()) {
    NamedTensors tensors;
    tensors.emplace_back("lse", HostTensor::copy_of(result.lse.data(), DType::f32,
                                                    std::vector<std::int64_t>{in.n, in.n_heads}));
    write_tensor_file(options.lse, tensors);
  }
  report(options, in, result);
}

void add_tensor_flags(CLI::App& command, AttentionOptions& options) {
  command
      .add_option("--inputs", options.inputs,
                  ".safetensors file holding q, k, v (and optionally kv_slot, kv_pos, q_slot, "
                  "q_pos) under those names")
      ->check(CLI::ExistingFile);
  const std::pair<const char*, const char*> roles[] = {
      {"q", "queries [n, n_heads, D] (or [n_heads, D]), f32/f16/bf16"},
      {"k", "keys [tokens, n_kv_heads, D] (or [tokens, D]), f32/f16/bf16"},
      {"v", "values, shaped like k"},
      {"kv_slot", "slot of each token, i32 [tokens] (default 0)"},
      {"kv_pos", "position of each token, i32 [tokens] (default 0, 1, ... per slot)"},
      {"q_slot", "slot of each query, i32 [n] (default 0)"},
      {"q_pos",
       "position of each query, i32 [n] (default: its slot's last position; with "
       "--query-tokens, each run ends there)"}};
  for (const auto& [role, help] : roles) {
    std::string flag = std::string("--") + role;
    std::replace(flag.begin(), flag.end(), '_', '-');
    command
        .add_option(flag, options.files[role],
                    std::string(help) + "; a .npy or .safetensors file (overrides --inputs)")
        ->check(CLI::ExistingFile);
  }
}

void add_layer_flags(CLI::App& command, AttentionOptions& options) {
  command.add_option("--v-format", options.v_format, "V format: f16, fp8 or tq3..tq8")
      ->capture_default_str();
  command.add_option("--k-format", options.k_format, "K format: f16, fp8 or tq3..tq8")
      ->capture_default_str();
  command.add_option("--layer", options.layer, "Cache addressing: linear or ring")
      ->check(CLI::IsMember({"linear", "ring"}))
      ->capture_default_str();
  command
      .add_option("--mask", options.mask,
                  "causal, sliding-ring or sliding-linear (default: causal for linear, "
                  "sliding-ring for ring)")
      ->check(CLI::IsMember({"causal", "sliding-ring", "sliding-linear"}));
  command.add_option("--window", options.window, "Sliding window in positions (0: none)")
      ->check(CLI::NonNegativeNumber);
  command
      .add_option("--capacity", options.capacity,
                  "Cache rows per slot (default: the window for ring, else last position + 1)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--scale", options.scale, "Score scale (0: 1/sqrt(D))")->capture_default_str();
  command.add_option("--softcap", options.softcap, "Logit softcap (0: off)")->capture_default_str();
  command
      .add_option("--scale-factor-d512", options.scale_factor_d512,
                  "TQ scale factor of D = 512 rows")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_flag("--rotated-output", options.rotated_output,
                   "Return R_D(o) for TQ V (stats still compare o)");
  command
      .add_option("--page-size", options.page_size,
                  "Rows per page of a paged cache whose block table hands each slot its pages in "
                  "a random order (0: contiguous)")
      ->check(CLI::IsMember({0, 16, 32, 64, 128}))
      ->capture_default_str();
  command
      .add_option("--query-tokens", options.query_tokens,
                  "Query rows per slot and call: q holds runs of this many rows, each one "
                  "slot's tokens at consecutive positions (speculative-decode verification)")
      ->check(CLI::Range(1, kMaxQueryTokens))
      ->capture_default_str();
}

}  // namespace

void register_attention_command(CLI::App& app) {
  static AttentionOptions options;
  CLI::App* command = add_command(
      app, "attention",
      "One decode step on user tensors: append k/v to a cache, attend with q, write the output "
      "and compare it with exact attention on the unquantized k/v",
      options, run_attention);
  add_tensor_flags(*command, options);
  add_layer_flags(*command, options);
  command->add_option("--output", options.output,
                      "Write the output [n, n_heads, D] f32 to .npy, or to .safetensors (as 'out', "
                      "with the exact reference as 'exact')");
  command->add_option("--lse", options.lse,
                      "Write each row's log-sum-exp of its scores [n, n_heads] f32 to .npy or "
                      ".safetensors (as 'lse')");
}

}  // namespace turbodecode::cli
