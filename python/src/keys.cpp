#include "keys.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "turbodecode/error.h"

namespace turbodecode::python {
namespace {

// Writes `name=value;` fields.
class KeyWriter {
 public:
  KeyWriter& add(std::string_view name, std::string_view value) {
    text_.append(name).append("=").append(value).append(";");
    return *this;
  }
  KeyWriter& add(std::string_view name, std::int64_t value) {
    return add(name, std::string_view(std::to_string(value)));
  }
  KeyWriter& add(std::string_view name, float value) {
    char hex[64];
    std::snprintf(hex, sizeof hex, "%a", static_cast<double>(value));
    return add(name, std::string_view(hex));
  }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
};

// Reads the fields a KeyWriter wrote; a missing or malformed field is the caller's argument's
// fault.
class KeyReader {
 public:
  KeyReader(const std::string& key, const char* argument) : argument_(argument) {
    std::string_view rest = key;
    while (!rest.empty()) {
      const std::size_t end = rest.find(';');
      const std::string_view field = rest.substr(0, end);
      const std::size_t eq = field.find('=');
      if (eq == std::string_view::npos)
        fail("has a field without '=': '" + std::string(field) + "'");
      fields_.emplace_back(field.substr(0, eq), field.substr(eq + 1));
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }
  }

  std::string text(std::string_view name) const {
    for (const auto& [field, value] : fields_) {
      if (field == name) return std::string(value);
    }
    fail("has no field '" + std::string(name) + "'");
  }

  std::int64_t integer(std::string_view name) const {
    const std::string value = text(name);
    std::int64_t result = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), result);
    if (error != std::errc{} || end != value.data() + value.size()) {
      fail("field '" + std::string(name) + "' is not an integer: '" + value + "'");
    }
    return result;
  }

  float real(std::string_view name) const {
    const std::string value = text(name);
    char* end = nullptr;
    const double result = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size()) {
      fail("field '" + std::string(name) + "' is not a number: '" + value + "'");
    }
    return static_cast<float>(result);
  }

  [[noreturn]] void fail(const std::string& rule) const {
    throw InvalidArgument(argument_, rule + " (keys come from the turbodecode Python layer)");
  }

 private:
  const char* argument_;
  std::vector<std::pair<std::string_view, std::string_view>> fields_;
};

// Parsed configurations by key. Bounded: a program uses a handful of configurations, and a
// caller that invents keys without end only costs re-parsing.
template <class T>
class KeyedCache {
 public:
  std::shared_ptr<const T> get(const std::string& key, const std::function<T()>& make) {
    {
      std::lock_guard lock(mutex_);
      if (auto found = entries_.find(key); found != entries_.end()) return found->second;
    }
    auto value = std::make_shared<const T>(make());  // planning may query the device: unlocked
    std::lock_guard lock(mutex_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.emplace(key, value);
    return value;
  }

 private:
  static constexpr std::size_t kMaxEntries = 4096;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const T>> entries_;
};

void write_cache_fields(KeyWriter& w, const KvCacheConfig& c) {
  w.add("slots", c.slots)
      .add("n_kv_heads", std::int64_t{c.n_kv_heads})
      .add("capacity", c.capacity)
      .add("head_dim", std::int64_t{c.head_dim})
      .add("kind", layer_kind_name(c.kind))
      .add("k_format", format_name(c.k_format))
      .add("v_format", format_name(c.v_format))
      .add("scale_factor_d512", c.scale_factor_d512)
      .add("device", device_name(c.device))
      .add("page_size", std::int64_t{c.page_size})
      .add("pages", c.pages);
}

KvCacheConfig read_cache_fields(const KeyReader& r, const char* argument) {
  KvCacheConfig c;
  c.slots = r.integer("slots");
  c.n_kv_heads = static_cast<int>(r.integer("n_kv_heads"));
  c.capacity = r.integer("capacity");
  c.head_dim = static_cast<int>(r.integer("head_dim"));
  c.kind = parse_layer_kind(r.text("kind"), argument);
  c.k_format = parse_format(r.text("k_format"));
  c.v_format = parse_format(r.text("v_format"));
  c.scale_factor_d512 = r.real("scale_factor_d512");
  c.device = parse_device(r.text("device"), argument);
  c.page_size = static_cast<int>(r.integer("page_size"));
  c.pages = r.integer("pages");
  return c;
}

void write_hc_fields(KeyWriter& w, const HcParams& p) {
  w.add("n_hc", std::int64_t{p.n_hc})
      .add("embd", p.embd)
      .add("sinkhorn_iters", std::int64_t{p.sinkhorn_iters})
      .add("eps", p.eps)
      .add("norm_eps", p.norm_eps);
}

HcParams read_hc_fields(const KeyReader& r) {
  HcParams p;
  p.n_hc = static_cast<int>(r.integer("n_hc"));
  p.embd = r.integer("embd");
  p.sinkhorn_iters = static_cast<int>(r.integer("sinkhorn_iters"));
  p.eps = r.real("eps");
  p.norm_eps = r.real("norm_eps");
  return p;
}

struct DecodePlanRequest {
  KvCacheConfig cache;
  DecodeOptions options;
  std::int64_t max_queries = 0;
};

DecodePlanRequest read_plan_request(const std::string& key, const char* argument) {
  const KeyReader r(key, argument);
  DecodePlanRequest request;
  request.cache = read_cache_fields(r, argument);
  DecodeOptions& o = request.options;
  o.n_heads = static_cast<int>(r.integer("n_heads"));
  o.scale = r.real("scale");
  o.softcap = r.real("softcap");
  o.mask = parse_mask_kind(r.text("mask"), argument);
  o.sliding_window = r.integer("sliding_window");
  o.rotated_output = r.integer("rotated_output") != 0;
  o.query_tokens = static_cast<int>(r.integer("query_tokens"));
  o.fixed_chunk_positions = r.integer("fixed_chunk_positions");
  request.max_queries = r.integer("max_queries");
  return request;
}

KeyedCache<KvCacheConfig>& cache_configs() {
  static KeyedCache<KvCacheConfig> cache;
  return cache;
}
KeyedCache<DecodePlan>& decode_plans() {
  static KeyedCache<DecodePlan> cache;
  return cache;
}
KeyedCache<HcParams>& hc_params_cache() {
  static KeyedCache<HcParams> cache;
  return cache;
}
KeyedCache<HcPrePlan>& hc_pre_plans() {
  static KeyedCache<HcPrePlan> cache;
  return cache;
}

template <class Enum, std::size_t N>
Enum parse_name(const std::string& name, const std::pair<Enum, const char*> (&names)[N],
                const char* argument) {
  std::string known;
  for (const auto& [value, text] : names) {
    if (name == text) return value;
    known += known.empty() ? "" : ", ";
    known += text;
  }
  throw InvalidArgument(argument, "must be one of " + known + ", not '" + name + "'");
}

constexpr std::pair<LayerKind, const char*> kLayerKinds[] = {{LayerKind::linear, "linear"},
                                                             {LayerKind::ring, "ring"}};
constexpr std::pair<MaskKind, const char*> kMaskKinds[] = {
    {MaskKind::causal, "causal"},
    {MaskKind::sliding_ring, "sliding_ring"},
    {MaskKind::sliding_linear, "sliding_linear"}};
constexpr std::pair<Device, const char*> kDevices[] = {{Device::cpu, "cpu"},
                                                       {Device::cuda, "cuda"}};

}  // namespace

LayerKind parse_layer_kind(const std::string& name, const char* argument) {
  return parse_name(name, kLayerKinds, argument);
}
MaskKind parse_mask_kind(const std::string& name, const char* argument) {
  return parse_name(name, kMaskKinds, argument);
}
Device parse_device(const std::string& name, const char* argument) {
  return parse_name(name, kDevices, argument);
}
const char* layer_kind_name(LayerKind kind) {
  return kind == LayerKind::ring ? "ring" : "linear";
}
const char* mask_kind_name(MaskKind mask) {
  for (const auto& [value, text] : kMaskKinds) {
    if (value == mask) return text;
  }
  return "?";
}

std::string cache_key(const KvCacheConfig& config) {
  validate_config(config);
  KeyWriter w;
  write_cache_fields(w, config);
  return w.take();
}

std::string plan_key(const KvCacheConfig& cache, const DecodeOptions& options,
                     std::int64_t max_queries) {
  KeyWriter w;
  write_cache_fields(w, cache);
  w.add("n_heads", std::int64_t{options.n_heads})
      .add("scale", options.scale)
      .add("softcap", options.softcap)
      .add("mask", mask_kind_name(options.mask))
      .add("sliding_window", options.sliding_window)
      .add("rotated_output", std::int64_t{options.rotated_output})
      .add("query_tokens", std::int64_t{options.query_tokens})
      .add("fixed_chunk_positions", options.fixed_chunk_positions)
      .add("max_queries", max_queries);
  std::string key = w.take();
  decode_plan(key, "plan");  // plans (and so validates) now, and keeps the plan for the runs
  return key;
}

std::string hc_params_key(const HcParams& params) {
  KeyWriter w;
  write_hc_fields(w, params);
  return w.take();
}

std::string hc_pre_plan_key(const HcParams& params, std::int64_t max_rows, Device device) {
  KeyWriter w;
  write_hc_fields(w, params);
  w.add("max_rows", max_rows).add("device", device_name(device));
  std::string key = w.take();
  hc_pre_plan(key, "plan");
  return key;
}

std::shared_ptr<const KvCacheConfig> cache_config(const std::string& key, const char* argument) {
  return cache_configs().get(key, [&] {
    KvCacheConfig config = read_cache_fields(KeyReader(key, argument), argument);
    validate_config(config);
    return config;
  });
}

std::shared_ptr<const DecodePlan> decode_plan(const std::string& key, const char* argument) {
  return decode_plans().get(key, [&] {
    const DecodePlanRequest request = read_plan_request(key, argument);
    return plan_decode(request.cache, request.options, request.max_queries);
  });
}

std::shared_ptr<const HcParams> hc_params(const std::string& key, const char* argument) {
  return hc_params_cache().get(key, [&] { return read_hc_fields(KeyReader(key, argument)); });
}

std::shared_ptr<const HcPrePlan> hc_pre_plan(const std::string& key, const char* argument) {
  return hc_pre_plans().get(key, [&] {
    const KeyReader r(key, argument);
    return plan_hc_pre(read_hc_fields(r), r.integer("max_rows"),
                       parse_device(r.text("device"), argument));
  });
}

}  // namespace turbodecode::python
