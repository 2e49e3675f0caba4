// CUDA backend of append_kv (SPEC §1.3): one launch for every (token, KV head) of the batch. A
// block of two warps takes one (token, head) item at a time: warp 0 writes its K row, warp 1
// its V row, each converting to F16 or encoding to TurboQuant-HB codes as the cache's format
// says, so the K and V halves of an item proceed in parallel.
#include "cache/cuda/append_cuda.h"
#include "common/cuda_check.cuh"
#include "tq/cuda/row_launch.h"
#include "tq/cuda/warp_row.cuh"

namespace turbodecode::cuda {

namespace {

constexpr int kParts = 2;  // K and V
constexpr int kThreads = kParts * warp_row::kLanes;
constexpr int kF16Bits = 16;

// An input k or v tensor [tokens, n_kv_heads, D]; strides in bytes.
struct TokenRows {
  const unsigned char* data;
  DType dtype;
  std::int64_t token_bytes, head_bytes;

  __device__ const unsigned char* row(std::int64_t token, std::int64_t head) const {
    return data + token * token_bytes + head * head_bytes;
  }
};

// The K or V half of the cache: rows [slots, heads, capacity, ...] with byte strides, and norms
// [slots, heads, capacity, npp] with element strides (absent for F16 rows).
struct CacheRows {
  unsigned char* rows;
  std::int64_t slot_bytes, head_bytes, row_bytes;
  float* norms;
  std::int64_t norm_slot_stride, norm_head_stride, norm_row_stride;
  int bits;  // kF16Bits for F16 rows

  __device__ unsigned char* row(std::int64_t slot, std::int64_t head, std::int64_t r) const {
    return rows + slot * slot_bytes + head * head_bytes + r * row_bytes;
  }
  __device__ float* row_norms(std::int64_t slot, std::int64_t head, std::int64_t r) const {
    return norms + slot * norm_slot_stride + head * norm_head_stride + r * norm_row_stride;
  }
};

struct AppendLaunch {
  TokenRows k_in, v_in;
  CacheRows k_cache, v_cache;
  const std::int32_t* slot_ids;
  const std::int32_t* positions;
  std::int64_t slot_id_stride, position_stride;
  std::int64_t tokens, slots, capacity;
  int n_kv_heads;
  bool ring;
  float scale_factor_d512;
  bool vectorised;
};

// The cache row of (slot, position), or −1 when the pair names nothing the cache holds. The
// host validated the indices already; the guard keeps a bad index from ever writing outside.
__device__ __forceinline__ std::int64_t target_row(const AppendLaunch& p, std::int64_t slot,
                                                   std::int64_t position) {
  if (slot < 0 || slot >= p.slots || position < 0) return -1;
  if (p.ring) return position % p.capacity;
  return position < p.capacity ? position : -1;
}

template <int D>
__global__ void __launch_bounds__(kThreads) append_kv_kernel(const AppendLaunch p) {
  __shared__ float midpoints[kParts][tq_tables::kMaxTableEntries];
  __shared__ __align__(16) float scratch[kParts][D];
  const int part = static_cast<int>(threadIdx.x) / warp_row::kLanes;
  const int lane = static_cast<int>(threadIdx.x) % warp_row::kLanes;
  const bool is_k = part == 0;
  const TokenRows input = is_k ? p.k_in : p.v_in;
  const CacheRows cache = is_k ? p.k_cache : p.v_cache;
  if (cache.bits != kF16Bits) {
    tq_tables::stage_in_warp(tq_tables::midpoints(cache.bits), (1 << cache.bits) - 1,
                             midpoints[part], lane);
  }
  const std::int64_t items = p.tokens * p.n_kv_heads;
  for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const std::int64_t token = item / p.n_kv_heads;
    const std::int64_t head = item % p.n_kv_heads;
    const std::int64_t slot = p.slot_ids[token * p.slot_id_stride];
    const std::int64_t row = target_row(p, slot, p.positions[token * p.position_stride]);
    if (row < 0) continue;
    float v[warp_row::kPerLane<D>];
    warp_row::load_lane_values(input.row(token, head), input.dtype, p.vectorised, lane, v);
    unsigned char* destination = cache.row(slot, head, row);
    if (cache.bits == kF16Bits) {
      warp_row::store_lane_f16(v, destination, lane, p.vectorised);
      continue;
    }
    warp_row::rotate_forward<D>(v, lane);
    warp_row::encode_rotated<D>(v, cache.bits, p.scale_factor_d512, midpoints[part], scratch[part],
                                lane, destination, cache.row_norms(slot, head, row), p.vectorised);
  }
}

TokenRows token_rows(const TensorView& x) {
  return {static_cast<const unsigned char*>(x.data), x.dtype, stride_bytes(x, 0),
          stride_bytes(x, 1)};
}

CacheRows cache_rows(const TensorView& rows, const TensorView& norms, RowFormat format) {
  CacheRows c{static_cast<unsigned char*>(rows.data),
              stride_bytes(rows, 0),
              stride_bytes(rows, 1),
              stride_bytes(rows, 2),
              nullptr,
              0,
              0,
              0,
              is_quantized(format) ? format_bits(format) : kF16Bits};
  if (norms.present()) {
    c.norms = norms.as<float>();
    c.norm_slot_stride = norms.strides[0];
    c.norm_head_stride = norms.strides[1];
    c.norm_row_stride = norms.strides[2];
  }
  return c;
}

}  // namespace

void append_kv(const KvCacheView& cache, const TensorView& k, const TensorView& v,
               const TensorView& slot_ids, const TensorView& positions, Stream stream) {
  const KvCacheConfig& c = cache.config;
  const AppendLaunch p{token_rows(k),
                       token_rows(v),
                       cache_rows(cache.k, cache.k_norms, c.k_format),
                       cache_rows(cache.v, cache.v_norms, c.v_format),
                       slot_ids.as<const std::int32_t>(),
                       positions.as<const std::int32_t>(),
                       slot_ids.strides[0],
                       positions.strides[0],
                       k.shape[0],
                       c.slots,
                       c.capacity,
                       c.n_kv_heads,
                       c.kind == LayerKind::ring,
                       c.scale_factor_d512,
                       allows_vector_access(k) && allows_vector_access(v) &&
                           allows_vector_access(cache.k) && allows_vector_access(cache.v)};
  const unsigned blocks = grid_blocks(p.tokens * p.n_kv_heads, 1);
  if (c.head_dim == 256) {
    append_kv_kernel<256><<<blocks, kThreads, 0, native(stream)>>>(p);
  } else {
    append_kv_kernel<512><<<blocks, kThreads, 0, native(stream)>>>(p);
  }
  TD_CUDA_CHECK_LAUNCH("append_kv_kernel");
}

}  // namespace turbodecode::cuda
