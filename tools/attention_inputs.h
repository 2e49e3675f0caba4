// The `attention` subcommand's flags and inputs: the q, k, v tensors and index arrays it reads,
// and the checks (SPEC §7, §7.1) that run on them before anything is sized from them. Errors
// name what the user typed: a tensor's own flag (--q, --kv-pos, ...), or --inputs when the
// tensor came from that file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "input_limits.h"
#include "turbodecode/attention.h"
#include "turbodecode/io.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::cli {

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
  int page_size = 0;  // 0: a contiguous cache
  std::string output;
  std::string lse;
  InputLimits limits;
};

// What the user typed for a tensor role: its own flag (--kv-pos for kv_pos), or --inputs when
// the tensor came from that file (`prefix` then names the tensor in the rule).
struct TensorArgument {
  std::string argument;
  std::string prefix;
};

// The step's tensors: q [n, n_heads, D]; k, v [tokens, n_kv_heads, D] (file dtype); index
// arrays, defaults filled in; and, per role, what the user typed for it.
struct StepInputs {
  HostTensor q, k, v;
  std::vector<float> q_values, k_values, v_values;
  std::vector<std::int32_t> kv_slot, kv_pos, q_slot, q_pos;
  std::int64_t n = 0, tokens = 0;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  std::map<std::string, TensorArgument> arguments;
};

// The flag of a tensor role: --kv-pos for kv_pos.
std::string flag_of(const std::string& role);

// Reads the tensors named by the flags or held by --inputs and checks their shapes, dtypes and
// index values; fills the index arrays a user left out (each run of --query-tokens queries at
// the last positions appended to its slot).
StepInputs load_inputs(const AttentionOptions& options);

// The layer's mask: --mask, or the default of --layer; checks that they go together.
MaskKind mask_kind(const AttentionOptions& options);

// The cache the step needs (slots and capacity from the index arrays, or --capacity /
// --window; paged with --page-size: each slot its own pages), checked against options.limits
// before it is allocated.
KvCacheConfig cache_config(const AttentionOptions& options, const StepInputs& in);

// Which token each written cache row holds once every token is appended in file order (a
// later token that names the same (slot, row) replaces an earlier one): (slot, row) -> token.
using RowOwners = std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t>;
RowOwners row_owners(const KvCacheConfig& config, const StepInputs& in);
// The cache row that holds `position`.
std::int64_t row_of(const KvCacheConfig& config, std::int64_t position);

// SPEC §7.1: a query may only see positions appended to its slot and still held by their rows.
// Throws InvalidArgument naming q_slot or q_pos otherwise.
void check_queries_see_appended_rows(const StepInputs& in, const KvCacheConfig& config,
                                     const DecodeOptions& decode, const RowOwners& owners);

}  // namespace turbodecode::cli
