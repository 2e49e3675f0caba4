// CUDA backend of append_kv (SPEC §1.3, §1.7): one launch for every (token, KV head) of the
// batch. The grid is one wave of resident blocks; each warp takes an equal range of consecutive
// (token, head) rows and writes each one's V row, then its K row, converting to F16 or encoding
// to FP8 or TurboQuant-HB codes as the cache's formats say. A warp loads its next row while it
// writes the current one: encoding is a long dependent chain (butterflies, shuffles, a norm),
// so without that too few loads are in flight to stream at bandwidth; alternating V and K rows
// keeps the memory traffic and the arithmetic of every warp interleaved. A block builds its
// code bucket tables once, while its warps' first rows load. The rows of a range are the heads
// of few tokens, so a token's slot, position and (paged cache) block table entry are loaded
// once for all its heads, while the row before is written.
#include "cache/cuda/append_cuda.h"
#include "cache/row_location.h"
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dependent_launch.cuh"
#include "common/validate.h"
#include "tq/cuda/row_launch.h"
#include "tq/cuda/warp_row.cuh"

namespace turbodecode::cuda {

namespace {

constexpr int kParts = 2;  // K and V: bucket tables [0] and [1]
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * warp_row::kLanes;
// Blocks per SM each kernel variant is built for: the most its registers allow without spills
// (-Xptxas -v) but for the D 512 16-bit-input variant, which spills one register (reloaded
// once per packed-code row) rather than lose a block; left to itself the compiler may take a
// few more registers and lose a block.
template <int D, bool kWide>
inline constexpr int kMinBlocksPerSm = D == 256 ? 4 : (kWide ? 2 : 3);
// Row indices are 32-bit; no device holds the inputs of this many rows.
constexpr std::int64_t kMaxRows = std::int64_t{1} << 29;

// An input k or v tensor [tokens, n_kv_heads, D]; strides in bytes.
struct TokenRows {
  const unsigned char* data;
  DType dtype;
  std::int64_t token_bytes, head_bytes;

  __device__ const unsigned char* row(std::int64_t token, std::int64_t head) const {
    return data + token * token_bytes + head * head_bytes;
  }
};

// A cache::RowLocation in 32 bits (blocks and rows are below 2^31), to spare registers.
struct StorageRow {
  int block, row;
};

// The K or V half of the cache: rows [blocks, heads, block_rows, ...] with byte strides, and
// side values (norms or scales) [blocks, heads, block_rows, n] with element strides (absent for
// F16 rows). Blocks are slots or pages (cache/row_location.h).
struct CacheRows {
  unsigned char* rows;
  std::int64_t block_bytes, head_bytes, row_bytes;
  float* norms;
  std::int64_t norm_block_stride, norm_head_stride, norm_row_stride;
  RowEncoding encoding;

  __device__ unsigned char* row(int head, const StorageRow& at) const {
    return rows + at.block * block_bytes + head * head_bytes + at.row * row_bytes;
  }
  __device__ float* row_norms(int head, const StorageRow& at) const {
    return norms + at.block * norm_block_stride + head * norm_head_stride +
           at.row * norm_row_stride;
  }
};

struct AppendLaunch {
  TokenRows k_in, v_in;
  CacheRows k_cache, v_cache;
  const std::int32_t* slot_ids;
  const std::int32_t* positions;
  std::int64_t slot_id_stride, position_stride;
  int rows;  // tokens × n_kv_heads, row = token · n_kv_heads + head
  int n_kv_heads;
  // The host validates the indices except while a graph is captured; the addressing guards
  // them, so a bad index (or table entry) never writes, and a row that names nothing the cache
  // holds writes nothing.
  cache::RowAddressing addressing;
  int blocks;  // addressing.blocks(), the bound of each row's block check, in 32 bits
  float scale_factor_d512;
  bool vectorised;
};

// Where a (token, head) row goes: the token's slot and position as loaded, then its row within
// its block and the block (the block table entry of a paged cache) once those have arrived,
// once per token. The storage row is decided only when the row is written, so each load
// completes while earlier work runs.
struct RowTarget {
  int token, head;
  int slot, position;
  int row, block;
};

__device__ __forceinline__ void load_indices(const AppendLaunch& p, RowTarget& t) {
  t.slot = p.slot_ids[t.token * p.slot_id_stride];
  t.position = p.positions[t.token * p.position_stride];
}

__device__ __forceinline__ RowTarget first_target(const AppendLaunch& p, int row) {
  RowTarget t;
  t.token = row / p.n_kv_heads;
  t.head = row % p.n_kv_heads;
  load_indices(p, t);
  return t;
}

// Positions are i32 and capacities fit 32 bits, so logical rows and blocks (slots or pages, both
// below 2^31) do too.
__device__ __forceinline__ void find_block(const AppendLaunch& p, RowTarget& t) {
  const std::int64_t logical = p.addressing.logical_row(t.position);
  t.row = static_cast<int>(p.addressing.row_in_block(logical));
  t.block = static_cast<int>(p.addressing.block_of(t.slot, logical));
}

// The storage row of a target, block −1 where its block is none of the cache's `blocks` (an
// unknown slot or position, or a table entry naming no page).
__device__ __forceinline__ StorageRow storage_row(const RowTarget& t, int blocks) {
  return {cache::RowAddressing::names_block(t.block, blocks) ? t.block : -1, t.row};
}

// The row after t: the next head of the same token, whose slot, position and block it keeps,
// or head 0 of the next token, whose indices it loads (true: its block is still to be found).
__device__ __forceinline__ bool step(const AppendLaunch& p, RowTarget& t) {
  if (++t.head < p.n_kv_heads) return false;
  t.head = 0;
  ++t.token;
  load_indices(p, t);
  return true;
}

// The lane's share of one input row, loaded ahead of its use (warp_row::load_lane_words): D/32
// words when an input is f32, half as many when both are 16-bit, so that the rows in flight
// cost fewer registers.
template <int D, bool kWide>
struct LaneWords {
  static constexpr int kCount = kWide ? warp_row::kPerLane<D> : warp_row::kPerLane<D> / 2;
  unsigned words[kCount];
};

template <int D, bool kWide>
__device__ __forceinline__ LaneWords<D, kWide> fetch_words(const TokenRows& input,
                                                           const RowTarget& t, bool vectorised,
                                                           int lane) {
  LaneWords<D, kWide> w;
  warp_row::load_lane_words<warp_row::kPerLane<D>>(input.row(t.token, t.head), input.dtype,
                                                   vectorised, lane, w.words);
  return w;
}

// Writes one K or V row: F16, FP8 codes with a scale, or TurboQuant-HB codes with norms
// (`buckets`: that format's table; `signs`: the lane's rotation signs), at the place `place()`
// returns, which it asks for only once the row is encoded: a block table entry still on its
// way arrives while the row is encoded. Returns that place; a row at no place (block −1) is
// not stored.
template <int D, bool kWide, class Place>
__device__ __forceinline__ StorageRow write_row(const AppendLaunch& p, const RowTarget& t,
                                                const Place& place, const LaneWords<D, kWide>& in,
                                                DType dtype, const CacheRows& cache,
                                                const code_buckets::CodeBucket* buckets,
                                                float* scratch, int lane, unsigned signs) {
  float v[warp_row::kPerLane<D>];
  warp_row::widen_lane_words(in.words, dtype, v);
  if (cache.encoding.kind == RowKind::f16) {
    const StorageRow at = place();
    if (at.block >= 0) warp_row::store_lane_f16(v, cache.row(t.head, at), lane, p.vectorised);
    return at;
  }
  if (cache.encoding.kind == RowKind::fp8) {
    const warp_row::Fp8LaneCodes<D> codes = warp_row::encode_fp8<D>(v);
    const StorageRow at = place();
    if (at.block >= 0) {
      warp_row::store_fp8<D>(codes, lane, cache.row(t.head, at), cache.row_norms(t.head, at),
                             p.vectorised);
    }
    return at;
  }
  warp_row::rotate_forward<D>(v, lane, signs);  // TurboQuant-HB
  const warp_row::TqLaneCodes<D> codes = warp_row::encode_rotated<D>(
      v, cache.encoding.bits, p.scale_factor_d512, buckets, scratch, lane);
  const StorageRow at = place();
  if (at.block >= 0) {
    warp_row::store_rotated<D>(codes, cache.encoding.bits, scratch, lane, cache.row(t.head, at),
                               cache.row_norms(t.head, at), p.vectorised);
  }
  return at;
}

// The grid's warps split the rows evenly: warp g takes `per_warp` rows, one more if g < `extra`,
// after those of the warps before it.
struct WarpRanges {
  int per_warp, extra;

  __device__ int begin(int warp) const { return warp * per_warp + min(warp, extra); }
};

// Each warp writes its range of rows; for each, the V row, then the K row. The next row's V
// input is loaded before the current V row is written, its K input before the current K row is
// written: two loads in flight while the warp computes, and three rows of words live, not four.
// A new token's block table entry is loaded after the V row is written.
template <int D, bool kWide>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm<D, kWide>)
    append_kv_kernel(const AppendLaunch p, const WarpRanges ranges) {
  __shared__ code_buckets::CodeBucket buckets[kParts][code_buckets::kMaxBuckets];
  __shared__ __align__(16) float scratch[kWarps][D];
  // A dependent launch (dependent_launch.cuh): nothing is read before the kernel before it
  // completes, and the kernel after may start early.
  allow_dependent_grids();
  wait_for_prior_grids();
  const int warp = static_cast<int>(threadIdx.x) / warp_row::kLanes;
  const int lane = static_cast<int>(threadIdx.x) % warp_row::kLanes;
  const int grid_warp = static_cast<int>(blockIdx.x) * kWarps + warp;
  const int begin = ranges.begin(grid_warp);
  const int end = ranges.begin(grid_warp + 1);
  const unsigned signs = warp_row::lane_sign_bits<D>(lane);
  RowTarget next{};
  LaneWords<D, kWide> v_next{}, k_next{};
  if (begin < end) {
    next = first_target(p, begin);
    v_next = fetch_words<D, kWide>(p.v_in, next, p.vectorised, lane);
    k_next = fetch_words<D, kWide>(p.k_in, next, p.vectorised, lane);
  }
  if (p.k_cache.encoding.kind == RowKind::tq) {
    tq_tables::fill_code_buckets(p.k_cache.encoding.bits, buckets[0]);
  }
  if (p.v_cache.encoding.kind == RowKind::tq) {
    tq_tables::fill_code_buckets(p.v_cache.encoding.bits, buckets[1]);
  }
  if (begin < end) find_block(p, next);
  __syncthreads();
  for (int row = begin; row < end; ++row) {
    const bool more = row + 1 < end;
    const RowTarget target = next;
    const bool new_token = more && step(p, next);
    const LaneWords<D, kWide> v_words = v_next;
    if (more) v_next = fetch_words<D, kWide>(p.v_in, next, p.vectorised, lane);
    const StorageRow at = write_row<D>(
        p, target, [&] { return storage_row(target, p.blocks); }, v_words, p.v_in.dtype, p.v_cache,
        buckets[1], scratch[warp], lane, signs);
    if (new_token) find_block(p, next);
    const LaneWords<D, kWide> k_words = k_next;
    if (more) k_next = fetch_words<D, kWide>(p.k_in, next, p.vectorised, lane);
    write_row<D>(
        p, target, [&] { return at; }, k_words, p.k_in.dtype, p.k_cache, buckets[0], scratch[warp],
        lane, signs);
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
              row_encoding(format)};
  if (norms.present()) {
    c.norms = norms.as<float>();
    c.norm_block_stride = norms.strides[0];
    c.norm_head_stride = norms.strides[1];
    c.norm_row_stride = norms.strides[2];
  }
  return c;
}

// One wave of resident blocks, fewer when the batch has fewer rows than the wave has warps.
template <int D, bool kWide>
void launch_append(const AppendLaunch& p, cudaStream_t stream) {
  // Occupancy depends only on the kernel and the device model: computed once.
  static const int resident_per_sm = [] {
    int blocks = 0;
    TD_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, append_kv_kernel<D, kWide>,
                                                                kThreads, 0));
    return blocks > 0 ? blocks : 1;
  }();
  const std::int64_t wanted = (std::int64_t{p.rows} + kWarps - 1) / kWarps;
  const std::int64_t wave = std::int64_t{resident_per_sm} * sm_count();
  const int blocks = static_cast<int>(wanted < wave ? wanted : wave);
  const int warps = blocks * kWarps;
  const WarpRanges ranges{p.rows / warps, p.rows % warps};
  launch_dependent(append_kv_kernel<D, kWide>, static_cast<unsigned>(blocks), kThreads, 0, stream,
                   p, ranges);
}

template <int D>
void launch_append(const AppendLaunch& p, cudaStream_t stream) {
  if (p.k_in.dtype == DType::f32 || p.v_in.dtype == DType::f32) {
    launch_append<D, true>(p, stream);
  } else {
    launch_append<D, false>(p, stream);
  }
}

}  // namespace

void append_kv(const KvCacheView& cache, const TensorView& k, const TensorView& v,
               const TensorView& slot_ids, const TensorView& positions, Stream stream) {
  const KvCacheConfig& c = cache.config;
  const std::int64_t rows = k.shape[0] * c.n_kv_heads;
  check_arg(rows < kMaxRows, "k",
            "must hold fewer than " + std::to_string(kMaxRows) + " rows (tokens × KV heads)");
  const cache::RowAddressing addressing = cache::row_addressing(cache);
  const AppendLaunch p{token_rows(k),
                       token_rows(v),
                       cache_rows(cache.k, cache.k_norms, c.k_format),
                       cache_rows(cache.v, cache.v_norms, c.v_format),
                       slot_ids.as<const std::int32_t>(),
                       positions.as<const std::int32_t>(),
                       slot_ids.strides[0],
                       positions.strides[0],
                       static_cast<int>(rows),
                       c.n_kv_heads,
                       addressing,
                       static_cast<int>(addressing.blocks()),
                       c.scale_factor_d512,
                       allows_vector_access(k) && allows_vector_access(v) &&
                           allows_vector_access(cache.k) && allows_vector_access(cache.v)};
  if (c.head_dim == 256) {
    launch_append<256>(p, native(stream));
  } else {
    launch_append<512>(p, native(stream));
  }
}

}  // namespace turbodecode::cuda
