#include "cache_arrays.h"

namespace turbodecode::python {

KvCacheView cache_arrays(ArrayArgs& a, const KvCacheConfig& config, nanobind::handle k,
                         nanobind::handle k_norms, nanobind::handle v, nanobind::handle v_norms,
                         nanobind::handle block_table, bool written) {
  auto rows = [&](nanobind::handle obj, const char* name) {
    return written ? a.output(obj, name) : a.input(obj, name);
  };
  auto side_values = [&](nanobind::handle obj, const char* name) {
    return written ? a.optional_output(obj, name) : a.optional_input(obj, name);
  };
  return {config,
          rows(k, "cache.k"),
          side_values(k_norms, "cache.k_norms"),
          rows(v, "cache.v"),
          side_values(v_norms, "cache.v_norms"),
          a.optional_input(block_table, "cache.block_table")};
}

}  // namespace turbodecode::python
