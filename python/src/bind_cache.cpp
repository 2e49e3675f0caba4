#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "array_args.h"
#include "bindings.h"
#include "keys.h"
#include "operators.h"
#include "turbodecode/buffer.h"
#include "turbodecode/kv_cache.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace turbodecode::python {
namespace {

std::string make_cache_key(std::int64_t slots, int n_kv_heads, std::int64_t capacity, int head_dim,
                           const std::string& kind, const std::string& k_format,
                           const std::string& v_format, float scale_factor_d512,
                           const std::string& device, int page_size, std::int64_t pages) {
  KvCacheConfig c;
  c.slots = slots;
  c.n_kv_heads = n_kv_heads;
  c.capacity = capacity;
  c.head_dim = head_dim;
  c.kind = parse_layer_kind(kind, "kind");
  c.k_format = parse_format(k_format);
  c.v_format = parse_format(v_format);
  c.scale_factor_d512 = scale_factor_d512;
  c.device = parse_device(device, "device");
  c.page_size = page_size;
  c.pages = pages;
  return cache_key(c);
}

// Zeroed host memory from the library's allocator (256-byte aligned, huge pages for large
// buffers, as the C++ KvCache gets), owned by the returned numpy array.
nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>> host_zeros(std::int64_t bytes) {
  auto* buffer = new Buffer(Device::cpu, bytes > 0 ? bytes : 1);
  buffer->fill_bytes(0);
  nb::capsule owner(buffer, [](void* p) noexcept { delete static_cast<Buffer*>(p); });
  const std::size_t shape[1] = {static_cast<std::size_t>(bytes > 0 ? bytes : 0)};
  return {buffer->data(), 1, shape, owner};
}

}  // namespace

void bind_cache(nb::module_& m) {
  nb::list page_sizes;
  for (int size : kPageSizes) page_sizes.append(size);
  m.attr("PAGE_SIZES") = page_sizes;
  m.def("cache_key", &make_cache_key, "slots"_a, "n_kv_heads"_a, "capacity"_a, "head_dim"_a,
        "kind"_a, "k_format"_a, "v_format"_a, "scale_factor_d512"_a, "device"_a, "page_size"_a,
        "pages"_a, "Validates a KvCacheConfig and returns its key.");
  m.def(
      "bytes_per_position",
      [](const std::string& cache) { return bytes_per_position(*cache_config(cache, "cache")); },
      "cache"_a, "Bytes one position of one KV head occupies (K + V + norms or scales).");
  m.def(
      "pages_per_slot",
      [](const std::string& cache) { return pages_per_slot(*cache_config(cache, "cache")); },
      "cache"_a, "Entries of a block table row (0 for a contiguous cache).");
  m.def("host_zeros", &host_zeros, "bytes"_a, "Zeroed, aligned host bytes as a numpy array.");
  m.def("append_kv", &ops::append_kv<ArrayArgs>, "cache"_a, "k_cache"_a, "k_norms"_a.none(),
        "v_cache"_a, "v_norms"_a.none(), "block_table"_a.none(), "k"_a, "v"_a, "slot_ids"_a,
        "positions"_a, "Quantize-on-write append of n tokens (kv_cache.h, append_kv).");
}

}  // namespace turbodecode::python
