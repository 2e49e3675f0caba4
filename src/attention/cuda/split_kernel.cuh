// The split kernel of decode attention: one block per (query, KV head, head chunk) and run of
// consecutive splits streams the splits' K and V rows once through a pipeline of shared-memory
// stages and keeps the online-softmax state (m, l, O) of every query head of its GQA group,
// written once per split.
//
// The block is warp-specialised. A copy warp issues every cp.async of the split, refilling a
// stage as soon as the compute warps release it (transaction barriers per stage), so the
// compute warps never issue a copy or wait for each other to refill. Each of the 4 compute
// warps owns a quarter of the head dimension, each thread D/128 consecutive elements: the
// thread holds its slice of every head's O in registers, so a V row is decoded once for the
// whole group. Per tile of T positions: partial scores per warp quarter (scores.cuh) -> their
// sum, one exp per score and a rescale per head -> O update (values.cuh: CUDA cores, or tensor
// cores for one-byte TQ V).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "attention/cuda/codebook_lookup.cuh"
#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/rotation.cuh"
#include "attention/cuda/row_access.cuh"
#include "attention/cuda/scores.cuh"
#include "attention/cuda/split_launch.h"
#include "attention/cuda/split_shape.h"
#include "attention/cuda/values.cuh"
#include "attention/state.h"
#include "common/cuda/cp_async.cuh"
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dependent_launch.cuh"
#include "common/cuda/pipeline_barriers.cuh"
#include "common/cuda/shared_memory_opt_in.cuh"
#include "tq/codec_math.h"

namespace turbodecode::cuda::decode {

// Reduction over aligned groups of kWidth lanes (a power of two up to 32).
template <int kWidth, class Op>
__device__ __forceinline__ float group_reduce(float value, Op op) {
#pragma unroll
  for (int offset = kWidth / 2; offset >= 1; offset /= 2) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Where one split's rows of one KV head live. Row arithmetic is 32-bit: run_decode rejects
// capacities of 2^31 rows or more, so first_row + logical (< 2 · capacity) cannot overflow.
struct SplitRows {
  const unsigned char* k_rows;
  const float* k_norms;
  const unsigned char* v_rows;
  const float* v_norms;
  std::uint64_t k_row_stride, v_row_stride, k_norm_stride, v_norm_stride;
  unsigned first_row;  // ring_start + window.first: the row of logical offset 0 before wrapping
  unsigned capacity;
  int end;  // logical offsets (from window.first) at or past the split's end are not copied

  // Cache row of logical offset `logical` (< window length: at most one wrap), or 0 past the
  // end. The wrap is an unsigned min: r − capacity wraps around to a huge value while r is
  // below capacity.
  __device__ __forceinline__ unsigned row(int logical) const {
    const unsigned r = first_row + static_cast<unsigned>(logical);
    return logical < end ? min(r, r - capacity) : 0u;
  }
};

// The start of row `row` of a plane whose rows are `stride` elements apart: one wide
// multiply-add (the row is unsigned, so no sign extension and no 64 × 64-bit product).
template <class Element>
__device__ __forceinline__ const Element* row_start(const Element* plane, unsigned row,
                                                    std::uint64_t stride) {
  return plane + row * stride;
}

// Copies the tile's rows of kRowBytes bytes (logical offsets tile_begin + t) into `stage`,
// kPitch bytes apart, with their 16-byte chunks at swizzled_chunk when kSwizzled: lane l of the
// copy warp takes chunks l, l + 32, ... of the tile in row-major order.
template <int kRowBytes, int kPitch, int kTile, bool kSwizzled>
__device__ __forceinline__ void copy_rows(const unsigned char* rows, std::uint64_t row_stride,
                                          const SplitRows& split, int tile_begin,
                                          unsigned char* stage, int lane) {
  constexpr int kChunksPerRow = kRowBytes / 16;
  static_assert((kTile * kChunksPerRow) % 32 == 0, "whole passes of the warp");
  // A lane's chunks lie in kColumns columns of the rows (1 for rows of up to 512 bytes).
  constexpr int kColumns = kChunksPerRow > 32 ? kChunksPerRow / 32 : 1;
  constexpr int kRowsPerPass = kChunksPerRow > 32 ? 1 : 32 / kChunksPerRow;
  const int first_chunk = kChunksPerRow > 32 ? lane : lane % kChunksPerRow;
  // A 64-bit base per column, so each copy's address is one wide multiply-add.
  const auto* base = reinterpret_cast<const unsigned char*>(__cvta_generic_to_global(rows));
#pragma unroll
  for (int k = 0; k < kTile * kChunksPerRow / 32; ++k) {
    const int column = k % kColumns;
    const int chunk = first_chunk + 32 * column;
    const int t = k / kColumns * kRowsPerPass + (kChunksPerRow > 32 ? 0 : lane / kChunksPerRow);
    const int logical = tile_begin + t;
    const int target_chunk = kSwizzled ? swizzled_chunk(chunk, t) : chunk;
    copy_async_16(stage + t * kPitch + target_chunk * 16,
                  row_start(base + chunk * 16, split.row(logical), row_stride),
                  logical < split.end ? 16 : 0);
  }
}

// The tile's norms, one 4-byte copy per lane of the copy warp and norm.
template <int kNormsPerRow, int kTile>
__device__ __forceinline__ void copy_norms(const float* norms, std::uint64_t norm_stride,
                                           const SplitRows& split, int tile_begin, float* stage,
                                           int lane) {
  constexpr int kCount = kTile * kNormsPerRow;
#pragma unroll
  for (int i = lane; i < kCount; i += 32) {
    const int logical = tile_begin + i / kNormsPerRow;
    copy_async_4(stage + i, row_start(norms, split.row(logical), norm_stride) + i % kNormsPerRow,
                 logical < split.end);
  }
}

// Issues the copies of one tile into a stage, from lane `lane` of the copy warp.
template <int D, int kHeads, RowCodec KC, RowCodec VC>
__device__ __forceinline__ void copy_tile(const SplitRows& split, int tile_begin,
                                          unsigned char* stage, int lane) {
  constexpr SplitShape s(D, kHeads, KC, VC);
  copy_rows<s.k_row_bytes, s.k_pitch, s.tile, s.k_swizzled>(split.k_rows, split.k_row_stride, split,
                                                            tile_begin, stage + s.stage_k, lane);
  copy_rows<s.v_row_bytes, s.v_pitch, s.tile, false>(split.v_rows, split.v_row_stride, split,
                                                     tile_begin, stage + s.stage_v, lane);
  if constexpr (KC != RowCodec::f16) {
    copy_norms<s.norms_per_row, s.tile>(split.k_norms, split.k_norm_stride, split, tile_begin,
                                        reinterpret_cast<float*>(stage + s.stage_k_norms), lane);
  }
  if constexpr (VC != RowCodec::f16) {
    copy_norms<s.norms_per_row, s.tile>(split.v_norms, split.v_norm_stride, split, tile_begin,
                                        reinterpret_cast<float*>(stage + s.stage_v_norms), lane);
  }
}

// The pipeline's barriers in shared memory: per stage, `full` completes a phase when the copy
// warp's copies of a tile have landed in the stage, `empty` when every compute thread is done
// with the stage's tile (and, for the last stage when the query rows live there, once before
// its first fill, when the scorers hold the rows in registers). Every thread arrives for
// itself, so each thread's reads are ordered before the refill without a warp barrier.
struct StageBarriers {
  std::uint64_t* full;
  std::uint64_t* empty;
};

// Barrier among the compute warps alone (the copy warp goes its own way).
__device__ __forceinline__ void compute_warps_sync() {
  named_barrier_sync<1, kSplitThreads>();
}

// The copy warp: streams the split's tiles through the stages, refilling each as soon as the
// compute warps release it, so the copies run as far ahead as the stages allow.
template <int D, int kHeads, RowCodec KC, RowCodec VC>
__device__ __forceinline__ void stream_tiles(const SplitRows& source, int first_position, int tiles,
                                             unsigned char* shared, const StageBarriers& barriers) {
  constexpr SplitShape s(D, kHeads, KC, VC);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile % s.stages;
    // Releases of the stage to wait for: one per earlier tile in it, and the query rows'.
    const int releases = tile / s.stages + (s.q_in_last_stage && stage == s.stages - 1 ? 1 : 0);
    if (releases > 0) mbarrier_wait(barriers.empty + stage, (releases - 1) & 1);
    copy_tile<D, kHeads, KC, VC>(source, first_position + tile * s.tile,
                                 shared + stage * s.stage_bytes, lane);
    mbarrier_arrive_after_copies(barriers.full + stage);
  }
  commit_copies();
  wait_copies<0>();  // no copy outlives the warp
}

// Stages the block's query rows (zeros for padding heads), R_D-rotated when K is TQ
// (SPEC §2.4), and the codebooks, by the compute warps; ends with their barrier.
template <int D, int kHeads, RowCodec KC, RowCodec VC>
__device__ __forceinline__ void stage_block_inputs(const DecodeParams& p, std::int64_t query,
                                                   int first_head, int heads_here,
                                                   unsigned char* shared) {
  constexpr SplitShape s(D, kHeads, KC, VC);
  float* q = reinterpret_cast<float*>(shared + s.q_offset);
  // All loads first (fully unrolled, so they are in flight together), then the stores.
  constexpr int kPerThread = kHeads * D / kSplitThreads;
  float values[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kSplitThreads;
    const int h = i / D;
    values[k] = h < heads_here
                    ? p.q[query * p.q_stride[0] + (first_head + h) * p.q_stride[1] + i % D]
                    : 0.0f;
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kSplitThreads;
    q[i] = KC == RowCodec::f16 ? values[k] : tq::apply_sign(values[k], sign_flipped(i % D));
  }
  if constexpr (KC != RowCodec::f16) {
    stage_plain_codebook<kSplitThreads>(reinterpret_cast<float*>(shared + s.k_codebook_offset),
                                        p.k.bits);
  }
  float* v_codebook = reinterpret_cast<float*>(shared + s.v_codebook_offset);
  if constexpr (s.v_lookup == VLookup::plain) {
    stage_plain_codebook<kSplitThreads>(v_codebook, p.v.bits);
  } else if constexpr (s.tensor_core_values) {
    stage_lane_codebook<s.v_copies, kSplitThreads>(v_codebook, p.v.bits,
                                                   [](float value) { return bf16_pair(value); });
  } else if constexpr (s.v_lookup != VLookup::none) {
    stage_lane_codebook<s.v_copies, kSplitThreads>(
        v_codebook, p.v.bits, [](float value) { return __float_as_uint(value); });
  }
  if constexpr (KC != RowCodec::f16) {
    hadamard_rows<kSplitThreads>(q, kHeads, D, [] { compute_warps_sync(); });
  } else {
    compute_warps_sync();
  }
}

// exp(m_part − m_total) for the tile softmax, 0 for m_part = −∞ (merge_weight of state.h, but
// with the hardware's approximate 2^x: two instructions instead of about ten, on the tile's
// critical path; relative error about 2^-22, far inside the 2e-3 of SPEC §5).
__device__ __forceinline__ float tile_weight(float m_part, float m_total) {
  constexpr float kLog2E = 1.4426950408889634f;
  float result;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(result) : "f"((m_part - m_total) * kLog2E));
  return m_part == -INFINITY ? 0.0f : result;
}

// Online softmax of one tile, by the first ceil(pairs/32) warps: thread i scores pair
// (head i / T, position i % T). m_run and l_run live in those threads' registers across
// tiles; l_run is the thread's own share of its head's sum (write_split_state adds the T
// shares once, at the end), so the tile's critical path holds one reduction, the max. Writes each
// head's rescale factor of O and returns the thread's weight exp(s − m).
template <int T, int kPairs, int kReduceWidth>
__device__ __forceinline__ float softmax_tile(const DecodeParams& p, const float* partial,
                                              int valid_rows, float& m_run, float& l_run,
                                              float* rescale) {
  const int i = static_cast<int>(threadIdx.x);
  const bool active = i < kPairs;
  const int t = i % T;
  float s = -INFINITY;
  if (active && t < valid_rows) {
    s = partial[i] + partial[kReduceWidth + i] + partial[2 * kReduceWidth + i] +
        partial[3 * kReduceWidth + i];
    s *= p.scale;
    if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
  }
  const float tile_max = group_reduce<T>(s, [](float a, float b) { return fmaxf(a, b); });
  const float m_new = fmaxf(m_run, tile_max);
  const float weight = tile_weight(s, m_new);
  const float factor = tile_weight(m_run, m_new);
  l_run = l_run * factor + weight;
  m_run = m_new;
  if (active && t == 0) rescale[i / T] = factor;
  return weight;
}

// The decode scales thread i folds into its softmax weight for the V pass (TQ V: one per
// norm of the row, D = 512 has two halves; 1 for F16 V), so the V pass uses plain codebook
// values: one multiply per pair instead of one per element and row. Read before the softmax,
// so the loads overlap its reductions.
template <int D, int kHeads, RowCodec KC, RowCodec VC>
struct WeightScales {
  static constexpr SplitShape kShape{D, kHeads, KC, VC};
  float value[kShape.weight_sets];

  __device__ WeightScales(const unsigned char* stage, float inverse_scale_factor_d512) {
    const float* norms = reinterpret_cast<const float*>(stage + kShape.stage_v_norms);
    const int t = static_cast<int>(threadIdx.x) % kShape.tile;
#pragma unroll
    for (int part = 0; part < kShape.weight_sets; ++part) {
      value[part] = VC == RowCodec::f16 ? 1.0f
                                        : decode_scale<D>(norms[t * kShape.norms_per_row + part],
                                                          inverse_scale_factor_d512);
    }
  }
};

// Stores thread i's softmax weight, scaled for each weight set, in the layout of the block's
// TileValues.
template <int D, int kHeads, RowCodec KC, RowCodec VC>
__device__ __forceinline__ void store_weight(float weight,
                                             const WeightScales<D, kHeads, KC, VC>& scales,
                                             float* weights) {
  constexpr SplitShape s(D, kHeads, KC, VC);
  const int i = static_cast<int>(threadIdx.x);
  if (i >= s.pairs) return;
#pragma unroll
  for (int part = 0; part < s.weight_sets; ++part) {
    TileValues<D, kHeads, KC, VC>::store_weight(
        weights, part, i, VC == RowCodec::f16 ? weight : weight * scales.value[part]);
  }
}

// The split covers logical offsets [begin, end) of the window; tiles count from `begin`.
template <RowCodec KC, RowCodec VC>
__device__ __forceinline__ SplitRows split_rows(const DecodeParams& p, const QueryRows& rows,
                                                int kv_head, std::int64_t end) {
  const auto offset = [&](const std::int64_t(&stride)[3]) {
    return rows.slot * stride[0] + kv_head * stride[1];
  };
  return {p.k.rows + offset(p.k.row_stride_bytes),
          KC == RowCodec::f16 ? nullptr : p.k.norms + offset(p.k.norm_stride),
          p.v.rows + offset(p.v.row_stride_bytes),
          VC == RowCodec::f16 ? nullptr : p.v.norms + offset(p.v.norm_stride),
          static_cast<std::uint64_t>(p.k.row_stride_bytes[2]),
          static_cast<std::uint64_t>(p.v.row_stride_bytes[2]),
          static_cast<std::uint64_t>(p.k.norm_stride[2]),
          static_cast<std::uint64_t>(p.v.norm_stride[2]),
          static_cast<unsigned>(rows.window.ring_start + rows.window.first),
          static_cast<unsigned>(rows.window.capacity),
          static_cast<int>(end)};
}

// Stores the split's unnormalised O slices (from every thread) and (m, l) pairs (from the
// softmax threads). state_base indexes the first head's state of this split.
template <int D, int kHeads, RowCodec KC, RowCodec VC>
__device__ __forceinline__ void write_split_state(const DecodeParams& p, std::int64_t state_base,
                                                  int heads_here,
                                                  const TileValues<D, kHeads, KC, VC>& values,
                                                  float m_run, float l_run) {
  constexpr int T = SplitShape(D, kHeads, KC, VC).tile;
  values.write(p.partial_o + state_base * D, static_cast<std::int64_t>(p.max_splits) * D,
               heads_here);
  const int i = static_cast<int>(threadIdx.x);
  // Every warp reduces (the softmax warps are whole warps; the others' shares are zeros).
  const float l = group_reduce<T>(l_run, [](float a, float b) { return a + b; });
  if (i < T * kHeads && i % T == 0 && i / T < heads_here) {
    p.partial_ml[state_base + static_cast<std::int64_t>(i / T) * p.max_splits] =
        make_float2(m_run, l);
  }
}

// The register cap keeps the blocks that shared memory allows (up to 4) resident. With
// kSeveralSplits, a block takes several consecutive splits of its query (run_decode's large
// launches); without, one, and the split loop compiles away (the extra loop state costs the
// tile loop registers: the one-split instance of 16/8 D 256 tq8 ran 3–8% slower with it).
template <int D, int kHeads, RowCodec KC, RowCodec VC, bool kSeveralSplits>
__global__ void __launch_bounds__(kSplitBlockThreads,
                                  SplitShape(D, kHeads, KC, VC).resident_blocks())
    split_kernel(const __grid_constant__ DecodeParams p) {
  constexpr SplitShape s(D, kHeads, KC, VC);
  constexpr int T = s.tile;
  // Split boundaries fall on multiples of kSplitAlign, so only a query's last split has a
  // partial tile; softmax_tile reduces a head's T scores inside one warp.
  static_assert(kSplitAlign % T == 0 && T <= 32, "a tile is a power of two dividing the align");
  extern __shared__ __align__(16) unsigned char shared[];
  // The merge kernel (a dependent launch) may take SMs as they come free; it waits for this
  // grid to complete before it reads any state.
  allow_dependent_grids();

  const int kv_head = static_cast<int>(blockIdx.y) / p.head_chunks;
  const int chunk = static_cast<int>(blockIdx.y) % p.head_chunks;
  const std::int64_t query = blockIdx.z;
  const QueryRows rows = resolve_query(p, query);
  if (!rows.valid) return;  // whole block: before any barrier
  // The block takes splits [first_split, end_split) of its query: the fewest consecutive
  // splits per block that the grid's blocks along x cover. They are contiguous positions
  // (boundaries on whole tiles), so the copy warp streams them as one range; only the compute
  // warps see where one ends.
  const int splits_per_block =
      kSeveralSplits ? (rows.splits + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x)
                     : 1;
  const int first_split = static_cast<int>(blockIdx.x) * splits_per_block;
  if (first_split >= rows.splits) return;
  const int end_split =
      kSeveralSplits ? min(first_split + splits_per_block, rows.splits) : first_split + 1;
  const std::int64_t visible = rows.window.visible();
  const auto split_of = [&](int split) {
    return attention::split_range(visible, rows.splits, split, kSplitAlign);
  };
  const std::int64_t begin = split_of(first_split).begin;
  const std::int64_t end = split_of(end_split - 1).end;

  const StageBarriers barriers{
      reinterpret_cast<std::uint64_t*>(shared + s.barrier_offset),
      reinterpret_cast<std::uint64_t*>(shared + s.barrier_offset) + s.stages};
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < s.stages; ++stage) {
      mbarrier_init(barriers.full + stage, 32);              // every lane of the copy warp
      mbarrier_init(barriers.empty + stage, kSplitThreads);  // every compute thread
    }
  }
  __syncthreads();  // the block's only full barrier: the copy warp leaves after its stream
  if (threadIdx.x >= kSplitThreads) {
    stream_tiles<D, kHeads, KC, VC>(split_rows<KC, VC>(p, rows, kv_head, end),
                                    static_cast<int>(begin),
                                    static_cast<int>((end - begin + T - 1) / T), shared, barriers);
    return;
  }

  const int first_head = kv_head * p.group + chunk * kHeads;
  const int heads_here = min(kHeads, p.group - chunk * kHeads);
  stage_block_inputs<D, kHeads, KC, VC>(p, query, first_head, heads_here, shared);
  const LaneSlice slice(D, static_cast<int>(threadIdx.x));
  // Copies q into registers; where q lives in the last stage, the copy warp fills that stage
  // only once every compute thread has released it here.
  const TileScorer<D, kHeads, KC, VC> scorer(reinterpret_cast<const float*>(shared + s.q_offset),
                                             slice);
  if constexpr (s.q_in_last_stage) mbarrier_arrive(barriers.empty + s.stages - 1);
  float* partial = reinterpret_cast<float*>(shared + s.partial_offset);
  float* weights = reinterpret_cast<float*>(shared + s.weight_offset);
  float* rescale = reinterpret_cast<float*>(shared + s.rescale_offset);
  const float inverse_scale_factor_d512 = 1.0f / p.scale_factor_d512;

  int first_tile = 0;  // the split's first tile in the block's stream
  int split = first_split;
  do {
    const attention::SplitRange range = split_of(split);
    const int split_tiles = static_cast<int>((range.end - range.begin + T - 1) / T);
    TileValues<D, kHeads, KC, VC> values(
        reinterpret_cast<const float*>(shared + s.v_codebook_offset), slice);
    float m_run = -INFINITY;
    float l_run = 0.0f;
    for (int split_tile = 0; split_tile < split_tiles; ++split_tile) {
      const int tile = first_tile + split_tile;
      const int stage_index = tile % s.stages;
      mbarrier_wait(barriers.full + stage_index, (tile / s.stages) & 1);
      const unsigned char* stage = shared + stage_index * s.stage_bytes;
      scorer.score(stage, reinterpret_cast<const float*>(shared + s.k_codebook_offset),
                   inverse_scale_factor_d512, partial);
      compute_warps_sync();
      if (static_cast<int>(threadIdx.x) < s.reduce_width) {  // whole warps
        const WeightScales<D, kHeads, KC, VC> scales(stage, inverse_scale_factor_d512);
        const auto valid_rows = static_cast<int>(range.end - range.begin - split_tile * T);
        const float weight =
            softmax_tile<T, s.pairs, s.reduce_width>(p, partial, valid_rows, m_run, l_run, rescale);
        store_weight<D, kHeads, KC, VC>(weight, scales, weights);
      }
      compute_warps_sync();
      values.accumulate(stage, weights, rescale);
      mbarrier_arrive(barriers.empty + stage_index);  // after this thread's reads of the stage
    }
    first_tile += split_tiles;
    write_split_state<D, kHeads, KC, VC>(p, (query * p.n_heads + first_head) * p.max_splits + split,
                                         heads_here, values, m_run, l_run);
  } while (kSeveralSplits && ++split < end_split);  // one pass in the one-split instance
}

// Launches split_kernel over grid (split blocks per query, n_kv_heads · head_chunks, n_queries):
// the instance whose blocks take several splits when there are fewer blocks than splits.
template <int D, int kHeads, RowCodec KC, RowCodec VC>
void launch_split(const DecodeParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int kSharedBytes = SplitShape(D, kHeads, KC, VC).shared_bytes;
  if (static_cast<int>(grid.x) < p.max_splits) {
    split_kernel<D, kHeads, KC, VC, true><<<grid, kSplitBlockThreads, kSharedBytes, stream>>>(p);
  } else {
    split_kernel<D, kHeads, KC, VC, false><<<grid, kSplitBlockThreads, kSharedBytes, stream>>>(p);
  }
  TD_CUDA_CHECK_LAUNCH("split_kernel");
}

template <int D, int kHeads, RowCodec KC, RowCodec VC>
SplitKernel split_kernel_for() {
  constexpr int kSharedBytes = SplitShape(D, kHeads, KC, VC).shared_bytes;
  static SharedMemoryOptIn one_split_opt_in, several_splits_opt_in;
  one_split_opt_in.ensure(reinterpret_cast<const void*>(&split_kernel<D, kHeads, KC, VC, false>),
                          kSharedBytes);
  several_splits_opt_in.ensure(
      reinterpret_cast<const void*>(&split_kernel<D, kHeads, KC, VC, true>), kSharedBytes);
  return {reinterpret_cast<const void*>(&split_kernel<D, kHeads, KC, VC, false>), kSharedBytes,
          &launch_split<D, kHeads, KC, VC>};
}

}  // namespace turbodecode::cuda::decode
