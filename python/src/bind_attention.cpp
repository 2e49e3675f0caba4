#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "array_args.h"
#include "bindings.h"
#include "keys.h"
#include "operators.h"
#include "turbodecode/attention.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace turbodecode::python {
namespace {

// Plans and returns the plan's fields beside its key.
nb::dict plan(const std::string& cache, int n_heads, float scale, float softcap,
              const std::string& mask, std::int64_t sliding_window, bool rotated_output,
              int query_tokens, std::int64_t fixed_chunk_positions, std::int64_t max_queries) {
  DecodeOptions o;
  o.n_heads = n_heads;
  o.scale = scale;
  o.softcap = softcap;
  o.mask = parse_mask_kind(mask, "options.mask");
  o.sliding_window = sliding_window;
  o.rotated_output = rotated_output;
  o.query_tokens = query_tokens;
  o.fixed_chunk_positions = fixed_chunk_positions;
  const std::string key = plan_key(*cache_config(cache, "cache"), o, max_queries);
  const auto p = decode_plan(key, "plan");
  nb::dict fields;
  fields["key"] = key;
  fields["scale"] = p->options.scale;
  fields["min_chunk_positions"] = p->min_chunk_positions;
  fields["max_chunks"] = p->max_chunks;
  fields["spread_chunk_positions"] = p->spread_chunk_positions;
  fields["workspace_bytes"] = p->workspace_bytes;
  fields["device_blocks"] = p->device_blocks;
  return fields;
}

}  // namespace

void bind_attention(nb::module_& m) {
  m.attr("MAX_QUERY_TOKENS") = kMaxQueryTokens;
  m.def("plan_decode", &plan, "cache"_a, "n_heads"_a, "scale"_a, "softcap"_a, "mask"_a,
        "sliding_window"_a, "rotated_output"_a, "query_tokens"_a, "fixed_chunk_positions"_a,
        "max_queries"_a,
        "Validates and plans a decode (attention.h, plan_decode); returns the plan's fields "
        "and its key.");
  m.def(
      "chunk_positions",
      [](const std::string& plan, std::int64_t visible) {
        return decode_plan(plan, "plan")->chunk_positions(visible);
      },
      "plan"_a, "visible"_a, "Positions per chunk of a row that sees `visible` positions.");
  m.def("run_decode", &ops::run_decode<ArrayArgs>, "plan"_a, "k_cache"_a, "k_norms"_a.none(),
        "v_cache"_a, "v_norms"_a.none(), "block_table"_a.none(), "q"_a, "slot_ids"_a, "seq_pos"_a,
        "out"_a, "lse"_a.none(), "workspace"_a, "Decode attention (attention.h, run_decode).");
}

}  // namespace turbodecode::python
