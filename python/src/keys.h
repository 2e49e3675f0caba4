// Keys: a configuration (cache, decode plan, HC parameters, HC-pre plan) written as one short
// string. The Python layer passes configurations to the extension and to torch.ops.turbodecode.*
// as keys, so an op call carries a single string argument instead of a dozen scalars, and
// torch.compile bakes the configuration into the graph as a constant. Each key is parsed (and
// planned) once per process; later calls look it up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "turbodecode/attention.h"
#include "turbodecode/hc.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::python {

// Validates the configuration, then writes its key. Floats are written in hexadecimal so that
// they parse back bit for bit.
std::string cache_key(const KvCacheConfig& config);
std::string plan_key(const KvCacheConfig& cache, const DecodeOptions& options,
                     std::int64_t max_queries);
std::string hc_params_key(const HcParams& params);
std::string hc_pre_plan_key(const HcParams& params, std::int64_t max_rows, Device device);

// The configuration a key names. Throws InvalidArgument naming `argument` when the key is
// malformed, and whatever validation or planning throws for the configuration it names.
std::shared_ptr<const KvCacheConfig> cache_config(const std::string& key, const char* argument);
std::shared_ptr<const DecodePlan> decode_plan(const std::string& key, const char* argument);
std::shared_ptr<const HcParams> hc_params(const std::string& key, const char* argument);
std::shared_ptr<const HcPrePlan> hc_pre_plan(const std::string& key, const char* argument);

// Names used in keys and accepted from Python.
LayerKind parse_layer_kind(const std::string& name, const char* argument);
MaskKind parse_mask_kind(const std::string& name, const char* argument);
Device parse_device(const std::string& name, const char* argument);
const char* layer_kind_name(LayerKind kind);
const char* mask_kind_name(MaskKind mask);

}  // namespace turbodecode::python
