// A KvCacheView over the Python arrays of a cache's storage (append_kv writes it, run_decode
// reads it).
#pragma once

#include <nanobind/nanobind.h>

#include "array_args.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::python {

KvCacheView cache_arrays(ArrayArgs& a, const KvCacheConfig& config, nanobind::handle k,
                         nanobind::handle k_norms, nanobind::handle v, nanobind::handle v_norms,
                         nanobind::handle block_table, bool written);

}  // namespace turbodecode::python
