// append_kv: one validation function for both backends (SPEC §1.3, §1.7, §7), then dispatch.
#include <algorithm>
#include <string>
#include <vector>

#include "cache/append_cpu.h"
#include "cache/cache_view_check.h"
#include "cache/row_location.h"
#include "common/cuda_runtime.h"
#include "common/index_read.h"
#include "common/validate.h"
#include "turbodecode/kv_cache.h"

#ifdef TURBODECODE_WITH_CUDA
#include "cache/cuda/append_cuda.h"
#endif

namespace turbodecode {

namespace {

void check_token_rows(const TensorView& x, std::string_view name, const KvCacheConfig& c,
                      std::int64_t tokens) {
  check_arg(x.present(), name, "must not be null");
  check_arg(x.dtype == DType::f32 || x.dtype == DType::f16 || x.dtype == DType::bf16, name,
            std::string("must be f32, f16 or bf16, not ") + dtype_name(x.dtype));
  check_rows(x, name, c.device, x.dtype, {tokens, c.n_kv_heads, c.head_dim});
}

// The table entries the tokens use, read on the host, each in [0, pages).
std::vector<std::int64_t> checked_blocks(const KvCacheView& cache, const cache::RowAddressing& a,
                                         const std::vector<std::int32_t>& slots,
                                         const std::vector<std::int64_t>& logical, Stream stream) {
  const KvCacheConfig& c = cache.config;
  if (!a.paged) return {slots.begin(), slots.end()};
  std::vector<std::int64_t> offsets;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    offsets.push_back(a.table_offset(slots[i], logical[i]));
  }
  const std::vector<std::int32_t> entries =
      read_elements_to_host(cache.block_table, offsets, stream);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    check_arg(entries[i] >= 0 && entries[i] < c.pages, "cache.block_table",
              "entry [" + std::to_string(slots[i]) + "][" +
                  std::to_string(a.table_column(logical[i])) + "] is " +
                  std::to_string(entries[i]) + ", must name a page in [0, pages = " +
                  std::to_string(c.pages) + ") (token " + std::to_string(i) + ")");
  }
  return {entries.begin(), entries.end()};
}

void check_index_values(const KvCacheView& cache, const std::vector<std::int32_t>& slots,
                        const std::vector<std::int32_t>& positions, Stream stream) {
  const KvCacheConfig& c = cache.config;
  const cache::RowAddressing a = cache::row_addressing(cache);
  std::vector<std::int64_t> logical;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::string token = " (token " + std::to_string(i) + ")";
    check_arg(slots[i] >= 0 && slots[i] < c.slots, "slot_ids",
              "must lie in [0, slots = " + std::to_string(c.slots) + ")" + token);
    check_arg(positions[i] >= 0, "positions", "must be non-negative" + token);
    check_arg(c.kind == LayerKind::ring || positions[i] < c.capacity, "positions",
              "must be below the linear cache's capacity " + std::to_string(c.capacity) + token);
    logical.push_back(a.logical_row(positions[i]));
  }
  const std::vector<std::int64_t> blocks = checked_blocks(cache, a, slots, logical, stream);
  const std::int64_t block_rows = cache::storage_grid(c).block_rows;
  std::vector<std::int64_t> targets;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const cache::RowLocation at = a.locate_in_block(blocks[i], logical[i]);
    targets.push_back(at.block * block_rows + at.row);
  }
  std::sort(targets.begin(), targets.end());
  check_arg(std::adjacent_find(targets.begin(), targets.end()) == targets.end(), "positions",
            "two tokens must not write the same cache row (of a slot, or of a shared page)");
}

void validate_append(const KvCacheView& cache, const TensorView& k, const TensorView& v,
                     const TensorView& slot_ids, const TensorView& positions, Stream stream) {
  const KvCacheConfig& c = cache.config;
  validate_config(c);
  cache::check_cache_view(cache);
  check_arg(k.present(), "k", "must not be null");
  const std::int64_t tokens = k.shape[0];
  check_token_rows(k, "k", c, tokens);
  check_token_rows(v, "v", c, tokens);
  check_rows(slot_ids, "slot_ids", c.device, DType::i32, {tokens});
  check_rows(positions, "positions", c.device, DType::i32, {tokens});
  const TensorView outputs[] = {cache.k, cache.k_norms, cache.v, cache.v_norms};
  const char* output_names[] = {"cache.k", "cache.k_norms", "cache.v", "cache.v_norms"};
  const TensorView inputs[] = {k, v, slot_ids, positions, cache.block_table};
  const char* input_names[] = {"k", "v", "slot_ids", "positions", "cache.block_table"};
  for (int o = 0; o < 4; ++o) {
    for (int i = 0; i < 5; ++i)
      check_disjoint(outputs[o], output_names[o], inputs[i], input_names[i]);
    for (int other = o + 1; other < 4; ++other) {
      check_disjoint(outputs[o], output_names[o], outputs[other], output_names[other]);
    }
  }
  // A captured launch replays with index values that do not exist yet: the kernel guards
  // them instead (kv_cache.h).
  if (c.device == Device::cuda && cuda::is_capturing(stream)) return;
  check_index_values(cache, read_indices_to_host(slot_ids, stream),
                     read_indices_to_host(positions, stream), stream);
}

}  // namespace

void append_kv(const KvCacheView& cache, const TensorView& k, const TensorView& v,
               const TensorView& slot_ids, const TensorView& positions, Stream stream) {
  validate_append(cache, k, v, slot_ids, positions, stream);
  if (k.shape[0] == 0) return;
#ifdef TURBODECODE_WITH_CUDA
  if (cache.config.device == Device::cuda) {
    return cuda::append_kv(cache, k, v, slot_ids, positions, stream);
  }
#endif
  cache::append_kv_cpu(cache, k, v, slot_ids, positions);
}

}  // namespace turbodecode
