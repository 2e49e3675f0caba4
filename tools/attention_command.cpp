// `turbodecode attention`: one decode step on user tensors. Appends K/V to a cache built with
// the chosen formats and layer kind, runs decode attention for the queries, writes the output
// and compares it with exact attention on the unquantized K/V.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "attention_inputs.h"
#include "commands.h"
#include "device_tensor.h"
#include "fidelity.h"
#include "global_options.h"
#include "option_checks.h"
#include "reference/attention_oracle.h"
#include "tensor_files.h"
#include "turbodecode/attention.h"
#include "turbodecode/error.h"
#include "turbodecode/kv_cache.h"
#include "turbodecode/mask_kind.h"

namespace turbodecode::cli {
namespace {

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

// Appends every token in file order, cutting a new batch wherever a (slot, row) would repeat
// (one call may not write a row twice).
void append_all(const KvCacheView& cache, const StepInputs& in) {
  const KvCacheConfig& config = cache.config;
  const Device device = config.device;
  const DeviceTensor k(device, in.k), v(device, in.v);
  const DeviceTensor slots(device, DType::i32, {in.tokens}, in.kv_slot);
  const DeviceTensor positions(device, DType::i32, {in.tokens}, in.kv_pos);
  std::int64_t batch_start = 0;
  std::set<std::pair<std::int64_t, std::int64_t>> in_batch;
  const auto flush = [&](std::int64_t end) {
    if (end == batch_start) return;
    const std::int64_t count = end - batch_start;
    append_kv(cache, k.rows(batch_start, count), v.rows(batch_start, count),
              slots.rows(batch_start, count), positions.rows(batch_start, count));
    batch_start = end;
    in_batch.clear();
  };
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    const std::pair<std::int64_t, std::int64_t> key{in.kv_slot[t], row_of(config, in.kv_pos[t])};
    if (in_batch.count(key)) flush(t);
    in_batch.insert(key);
  }
  flush(in.tokens);
  synchronize();
}

// Exact attention of query i over the unquantized K/V of the positions it sees (every one of
// them held by its cache row: check_queries_see_appended_rows).
std::vector<double> exact_for_query(const StepInputs& in, const KvCacheConfig& config,
                                    const DecodeOptions& options, const RowOwners& owners,
                                    std::int64_t i) {
  const std::int64_t position = in.q_pos[i];
  const std::int64_t first =
      visible_positions(options.mask, position, config.capacity, options.sliding_window).first;
  const std::size_t row_values = static_cast<std::size_t>(in.n_kv_heads) * in.head_dim;
  std::vector<float> k, v;
  for (std::int64_t p = first; p <= position; ++p) {
    const std::int64_t token = owners.at({in.q_slot[i], row_of(config, p)});
    const auto at = static_cast<std::ptrdiff_t>(token * row_values);
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
  std::vector<double> exact;  // [n, n_heads, D]
  Fidelity fidelity;
};

// Runs a library call on the step's inputs. The rules the CLI leaves to the library
// (--query-tokens on a ring layer in plan_decode; runs of --query-tokens queries being one
// slot's consecutive positions in run_decode) name the library's arguments; the error names
// what the user typed for them instead.
template <class Call>
auto naming_typed_arguments(const StepInputs& in, Call call) {
  try {
    return call();
  } catch (const InvalidArgument& error) {
    const std::map<std::string, TensorArgument> typed = {
        {"options.query_tokens", {"--query-tokens", ""}},
        {"slot_ids", in.arguments.at("q_slot")},
        {"seq_pos", in.arguments.at("q_pos")}};
    const auto argument = typed.find(error.argument());
    if (argument == typed.end()) throw;
    throw InvalidArgument(argument->second.argument, argument->second.prefix + error.rule());
  }
}

DecodeOptions decode_options(const AttentionOptions& cli, const StepInputs& in) {
  DecodeOptions options;
  options.n_heads = in.n_heads;
  options.scale = cli.scale;
  options.softcap = cli.softcap;
  options.mask = mask_kind(cli);
  options.sliding_window = cli.window;
  options.rotated_output = cli.rotated_output;
  options.query_tokens = cli.query_tokens;
  return options;
}

StepResult run_step(const AttentionOptions& cli, const StepInputs& in) {
  // Every check on the inputs runs before the cache is allocated.
  const DecodeOptions options = decode_options(cli, in);
  const KvCacheConfig config = cache_config(cli, in);
  const RowOwners owners = row_owners(config, in);
  check_queries_see_appended_rows(in, config, options, owners);
  const DecodePlan plan =
      naming_typed_arguments(in, [&] { return plan_decode(config, options, in.n); });

  const StepCache cache(config);
  append_all(cache.view(), in);
  const DeviceTensor q(config.device, DType::f32, {in.n, in.n_heads, in.head_dim}, in.q_values);
  const DeviceTensor slots(config.device, DType::i32, {in.n}, in.q_slot);
  const DeviceTensor positions(config.device, DType::i32, {in.n}, in.q_pos);
  const DeviceTensor out(config.device, DType::f32, {in.n, in.n_heads, in.head_dim});
  const std::optional<DeviceTensor> lse =
      cli.lse.empty() ? std::nullopt
                      : std::optional<DeviceTensor>(std::in_place, config.device, DType::f32,
                                                    std::vector<std::int64_t>{in.n, in.n_heads});
  const std::int64_t workspace_bytes = std::max<std::int64_t>(plan.workspace_bytes, 1);
  const DeviceTensor workspace(
      config.device, DType::u8, {workspace_bytes},
      std::vector<std::uint8_t>(static_cast<std::size_t>(workspace_bytes)));
  naming_typed_arguments(in, [&] {
    run_decode(plan, cache.view(), q.view(), slots.view(), positions.view(), out.view(),
               lse ? lse->view() : TensorView{}, workspace.view());
  });
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
    const std::vector<double> exact = exact_for_query(in, config, options, owners, i);
    result.exact.insert(result.exact.end(), exact.begin(), exact.end());
    result.fidelity.add_rows(comparable.data() + i * in.n_heads * in.head_dim, exact.data(),
                             in.n_heads, in.head_dim);
  }
  return result;
}

void report(const AttentionOptions& cli, const StepInputs& in, const StepResult& result) {
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
                                   {"output", cli.output},
                                   {"cosine_mean", result.fidelity.mean_cosine()},
                                   {"cosine_min", result.fidelity.min_cosine()},
                                   {"max_relative_error", result.fidelity.max_relative_error()}};
    fmt::print("{}\n", json.dump(2));
    return;
  }
  fmt::print(
      "decode step ({}): {} queries x {} heads over {} appended tokens, {} KV heads, D {}, "
      "K {} / V {}, {} layer\n",
      device_name(global_options().device), in.n, in.n_heads, in.tokens, in.n_kv_heads, in.head_dim,
      cli.k_format, cli.v_format, cli.layer);
  fmt::print(
      "vs exact attention (unquantized K/V): cosine mean {:.6f}, min {:.6f}, max rel err "
      "{:.3e}\n",
      result.fidelity.mean_cosine(), result.fidelity.min_cosine(),
      result.fidelity.max_relative_error());
  if (!cli.output.empty()) fmt::print("output written to {}\n", cli.output);
  if (!cli.lse.empty()) fmt::print("lse written to {}\n", cli.lse);
}

void write_output(const std::string& path, const StepInputs& in, const StepResult& result) {
  const std::vector<std::int64_t> shape = {in.n, in.n_heads, in.head_dim};
  NamedTensors tensors;
  tensors.emplace_back("out", HostTensor::copy_of(result.out.data(), DType::f32, shape));
  if (path.ends_with(".safetensors")) {
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
    command
        .add_option(flag_of(role), options.files[role],
                    std::string(help) + "; a .npy or .safetensors file (overrides --inputs)")
        ->check(CLI::ExistingFile);
  }
}

// 0 (contiguous) or a page size a paged cache takes.
std::vector<int> page_size_choices() {
  std::vector<int> choices = {0};
  choices.insert(choices.end(), std::begin(kPageSizes), std::end(kPageSizes));
  return choices;
}

void add_layer_flags(CLI::App& command, AttentionOptions& options) {
  command.add_option("--v-format", options.v_format, "V format: f16, fp8 or tq3..tq8")
      ->check(row_format_name())
      ->capture_default_str();
  command.add_option("--k-format", options.k_format, "K format: f16, fp8, tq4 or tq8")
      ->check(key_format_name())
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
                  "Cache rows per slot (default: the window for ring, else last position + 1). "
                  "The cache (slots x KV heads x capacity x bytes per position) may hold at most " +
                      std::to_string(options.limits.cache_bytes) + " bytes")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--scale", options.scale, "Score scale (0: 1/sqrt(D))")
      ->check(finite_non_negative())
      ->capture_default_str();
  command.add_option("--softcap", options.softcap, "Logit softcap (0: off)")
      ->check(finite_non_negative())
      ->capture_default_str();
  command
      .add_option("--scale-factor-d512", options.scale_factor_d512,
                  "TQ scale factor of D = 512 rows")
      ->check(finite_positive())
      ->capture_default_str();
  command.add_flag("--rotated-output", options.rotated_output,
                   "Return R_D(o) for TQ V (stats still compare o)");
  command
      .add_option("--page-size", options.page_size,
                  "Rows per page of a paged cache whose block table hands each slot its pages in "
                  "a random order (0: contiguous)")
      ->check(CLI::IsMember(page_size_choices()))
      ->capture_default_str();
  command
      .add_option("--query-tokens", options.query_tokens,
                  "Query rows per slot and call: q holds runs of this many rows, each one "
                  "slot's tokens at consecutive positions (speculative-decode verification)")
      ->check(CLI::Range(1, kMaxQueryTokens))
      ->capture_default_str();
}

}  // namespace

Command register_attention_command(CLI::App& app, const InputLimits& limits) {
  auto options_ptr = std::make_shared<AttentionOptions>();
  AttentionOptions& options = *options_ptr;
  options.limits = limits;
  CLI::App* command = add_command(
      app, "attention",
      "One decode step on user tensors: append k/v to a cache, attend with q, write the output "
      "and compare it with exact attention on the unquantized k/v");
  add_tensor_flags(*command, options);
  add_layer_flags(*command, options);
  command
      ->add_option("--output", options.output,
                   "Write the output [n, n_heads, D] f32 to .npy, or to .safetensors (as 'out', "
                   "with the exact reference as 'exact')")
      ->check(tensor_file_name());
  command
      ->add_option("--lse", options.lse,
                   "Write each row's log-sum-exp of its scores [n, n_heads] f32 to .npy or "
                   ".safetensors (as 'lse')")
      ->check(tensor_file_name());
  return {command, [options_ptr] { run_attention(*options_ptr); }};
}

}  // namespace turbodecode::cli
