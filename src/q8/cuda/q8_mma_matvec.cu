// Q8_0 matvec on tensor cores, for prefill (T > kQ8TileTokens token rows): out = W·xᵀ as a
// matrix product with output rows as M and tokens as N, by mma.sync m16n8k8 in TF32 with f32
// accumulators. Indices: src/q8/q8_mma_layout.h.
//
// Numerics. An int8 weight is exact in TF32. The block scale d is not applied to the weights
// (d·q has up to 18 significant bits, TF32 holds 11): each 32-column block's 4 k-steps
// accumulate Σ q·x into a fresh accumulator, which is then added as acc = fmaf(d, block, acc),
// in f32. The f32 input is split x = hi + lo: hi is x with its low 13 mantissa bits cleared
// (truncation: x − hi is exact and hi cannot overflow), lo = x − hi rounded to TF32.
// Two MMAs (W·hi, W·lo) give ≈ 22 bits of x, with f32 range (f16 would overflow on large
// activations). Every output element takes the same sequence of MMAs and FMAs over k, whatever
// the block shape or T, so rows at T > kQ8TileTokens are batch-invariant among themselves (but
// differ in the last bits from the CUDA-core path used at T ≤ kQ8TileTokens).
//
// Pipeline. A block owns a tile of rows × tokens and walks k in stages of 2 Q8_0 blocks
// (64 columns), 3 stages in flight through cp.async: weight rows are copied raw (34-byte blocks,
// rows only 2-byte aligned) as the 16-byte chunks that cover them, inputs as 16-byte chunks
// when every row is 16-byte aligned, else as 4-byte words. One __syncthreads per stage. Each
// thread works out its copies' rows once per tile (TileCopies), so a stage costs a few
// instructions per copy.
#include <cuda_fp16.h>

#include <cstdint>

#include "common/cuda/cp_async.cuh"
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/mma_tf32.cuh"
#include "common/cuda/shared_memory_opt_in.cuh"
#include "common/cuda/warp.cuh"
#include "q8/cuda/q8_cuda.h"
#include "q8/cuda/q8_widen.cuh"
#include "q8/q8_mma_layout.h"

namespace turbodecode::cuda {
namespace {

namespace layout = q8::mma;

constexpr int kLanes = kWarpSize;
constexpr int kStages = 3;
constexpr std::int64_t kMaxGridY = 65535;

// A block of kWarpsM × kWarpsN warps; each warp owns kMTiles 16-row × kNTiles 8-token tiles.
template <int kWarpsM, int kWarpsN, int kMTiles, int kNTiles, int kMinBlocksPerSm>
struct MmaShape {
  static constexpr int kWarpsAlongM = kWarpsM;
  static constexpr int kRowTiles = kMTiles;
  static constexpr int kTokenTiles = kNTiles;
  static constexpr int kMinBlocks = kMinBlocksPerSm;
  static constexpr int kThreads = kWarpsM * kWarpsN * kLanes;
  static constexpr int kRows = kWarpsM * kMTiles * 16;
  static constexpr int kTokens = kWarpsN * kNTiles * 8;
  static constexpr int kInputBytes = kTokens * layout::kInputStride * 4;
  static constexpr int kStageBytes = kInputBytes + kRows * layout::kRowStride;
  static constexpr int kSharedBytes = kStages * kStageBytes;
};
// Large T: 128 rows × 64 tokens, 8 warps of 32 × 32, 96 KB of stages, 2 blocks per SM.
using PrefillShape = MmaShape<4, 2, 2, 4, 2>;
// Smaller grids: 32 rows × 32 tokens, 4 warps of 16 × 16 (at T = 32 and 4096 rows, 128 blocks
// rather than PrefillShape's 32, with no warp working on padding tokens).
using ShortShape = MmaShape<2, 2, 1, 2, 4>;
// PrefillShape when its grid has about one block per SM of an H200 (132) or more.
constexpr std::int64_t kPrefillMinBlocks = 128;

// --- copies into shared memory --------------------------------------------------------------

// The first `bytes` (even, < 16) of 16 global bytes by plain 2-byte loads, the rest of the
// destination zeroed: for the chunk that ends the weight view, where a 16-byte read could leave
// the allocation.
__device__ __forceinline__ void copy_tail_16(void* shared, const void* global, int bytes) {
  const auto* src = static_cast<const std::uint16_t*>(global);
  auto* dst = static_cast<std::uint16_t*>(shared);
#pragma unroll
  for (int i = 0; i < 8; ++i) dst[i] = 2 * i < bytes ? __ldg(src + i) : std::uint16_t{0};
}
// Start mod 16 of the span of Q8_0 block `first_block` of row `row`.
__device__ __forceinline__ int span_lead(const q8::MatvecArgs& a, std::int64_t row,
                                         std::int64_t first_block) {
  const auto start =
      reinterpret_cast<std::uintptr_t>(a.weight) +
      static_cast<std::uintptr_t>(row * a.row_stride_bytes + first_block * kQ8BlockBytes);
  return static_cast<int>(start % layout::kChunkBytes);
}

// What a thread copies for every stage of a tile, worked out once per tile (recomputing the
// rows' addresses and leads every stage took half of the kernel's instructions at T = 32; this
// is faster although the prefill shape spills 80 bytes under its 128-register cap):
// weight items i = thread, thread + kThreads, … (chunk i mod kRowChunks of tile row
// i / kRowChunks) and, for 16-byte aligned inputs, input items (4 columns of one token).
template <class Shape>
struct TileCopies {
  static constexpr int kWeightItems =
      (Shape::kRows * layout::kRowChunks + Shape::kThreads - 1) / Shape::kThreads;
  static constexpr int kInputsPerToken = layout::kStageCols / 4;
  static constexpr int kInputItems =
      (Shape::kTokens * kInputsPerToken + Shape::kThreads - 1) / Shape::kThreads;

  const std::uint8_t* weight_row[kWeightItems];  // row start; null: no item, or past out_rows
  int weight_lead[kWeightItems];                 // row start mod 16
  const float* input_row[kInputItems];           // token's first column + the item's; null past T
  const std::uint8_t* view_end;                  // the weight view's last byte + 1

  __device__ TileCopies(const q8::MatvecArgs& a, std::int64_t row0, std::int64_t token0,
                        bool vectors) {
    view_end = a.weight + (a.out_rows - 1) * a.row_stride_bytes + q8_row_bytes(a.cols);
#pragma unroll
    for (int u = 0; u < kWeightItems; ++u) {
      const int i = static_cast<int>(threadIdx.x) + u * Shape::kThreads;
      const std::int64_t row = row0 + i / layout::kRowChunks;
      const bool inside = i < Shape::kRows * layout::kRowChunks && row < a.out_rows;
      weight_row[u] = inside ? a.weight + row * a.row_stride_bytes : nullptr;
      weight_lead[u] = inside ? span_lead(a, row, 0) : 0;
    }
#pragma unroll
    for (int u = 0; u < kInputItems; ++u) {
      const int i = static_cast<int>(threadIdx.x) + u * Shape::kThreads;
      const std::int64_t token = token0 + i / kInputsPerToken;
      const bool inside = vectors && i < Shape::kTokens * kInputsPerToken && token < a.tokens;
      input_row[u] = inside ? a.input + token * a.input_stride + i % kInputsPerToken * 4 : nullptr;
    }
  }
};

// Stage `stage` of the tile's weight rows: chunk c of row r goes to buffer r, bytes 16c.
// Rows past the end are zero-filled (they feed only output rows that are never stored).
template <class Shape>
__device__ __forceinline__ void copy_weight_stage(const TileCopies<Shape>& c, std::int64_t stage,
                                                  int blocks, unsigned char* buffers) {
  // The span of row r starts at row + 68·stage: its lead moves by 68 mod 16 = 4 per stage.
  static_assert(layout::kStageBlocks * kQ8BlockBytes % layout::kChunkBytes == 4);
#pragma unroll
  for (int u = 0; u < TileCopies<Shape>::kWeightItems; ++u) {
    const int i = static_cast<int>(threadIdx.x) + u * Shape::kThreads;
    if (i >= Shape::kRows * layout::kRowChunks) break;
    const int r = i / layout::kRowChunks;
    const int chunk = i - r * layout::kRowChunks;
    unsigned char* dst = buffers + r * layout::kRowStride + layout::kChunkBytes * chunk;
    if (c.weight_row[u] == nullptr) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      continue;
    }
    const int lead = (c.weight_lead[u] + 4 * static_cast<int>(stage)) % layout::kChunkBytes;
    const int bytes = layout::chunk_bytes(lead, blocks, chunk);
    if (bytes <= 0) continue;
    const std::uint8_t* src = c.weight_row[u] + stage * layout::kStageBlocks * kQ8BlockBytes -
                              lead + layout::kChunkBytes * chunk;
    if (src + layout::kChunkBytes <= c.view_end) {
      copy_async_16(dst, src, bytes);
    } else {
      copy_tail_16(dst, src, bytes);
    }
  }
}

// Stage `stage` of the tile's inputs, kWidth floats per copy: token n's columns at
// n·kInputStride. Tokens past T are zero-filled; columns past a short last stage are neither
// copied nor read. kWidth = 4 (16-byte aligned inputs) takes the tile's precomputed rows; the
// 4-byte path recomputes them (more items per thread than registers to keep).
template <class Shape, int kWidth>
__device__ __forceinline__ void copy_input_stage(const q8::MatvecArgs& a,
                                                 const TileCopies<Shape>& c, std::int64_t token0,
                                                 std::int64_t first_col, int blocks,
                                                 float* inputs) {
  constexpr int kPerToken = layout::kStageCols / kWidth;
  constexpr int kItems = (Shape::kTokens * kPerToken + Shape::kThreads - 1) / Shape::kThreads;
  const int cols = blocks * kQ8BlockValues;
#pragma unroll
  for (int u = 0; u < kItems; ++u) {
    const int i = static_cast<int>(threadIdx.x) + u * Shape::kThreads;
    if (i >= Shape::kTokens * kPerToken) break;
    const int n = i / kPerToken;
    const int col = (i - n * kPerToken) * kWidth;
    if (col >= cols) continue;
    float* dst = inputs + n * layout::kInputStride + col;
    if constexpr (kWidth == 4) {
      if (c.input_row[u] != nullptr) {
        copy_async_16(dst, c.input_row[u] + first_col, 16);
      } else {
        *reinterpret_cast<float4*>(dst) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    } else {
      const std::int64_t token = token0 + n;
      if (token < a.tokens) {
        copy_async_4(dst, a.input + token * a.input_stride + first_col + col, true);
      } else {
        *dst = 0.0f;
      }
    }
  }
}

template <class Shape>
__device__ __forceinline__ void copy_stage(const q8::MatvecArgs& a, const TileCopies<Shape>& c,
                                           std::int64_t token0, std::int64_t stage, bool vectors,
                                           unsigned char* shared) {
  const std::int64_t first_block = stage * layout::kStageBlocks;
  const std::int64_t left = a.cols / kQ8BlockValues - first_block;
  const int blocks = left < layout::kStageBlocks ? static_cast<int>(left) : layout::kStageBlocks;
  unsigned char* buffer = shared + (stage % kStages) * Shape::kStageBytes;
  float* inputs = reinterpret_cast<float*>(buffer);
  if (vectors) {
    copy_input_stage<Shape, 4>(a, c, token0, first_block * kQ8BlockValues, blocks, inputs);
  } else {
    copy_input_stage<Shape, 1>(a, c, token0, first_block * kQ8BlockValues, blocks, inputs);
  }
  copy_weight_stage<Shape>(c, stage, blocks, buffer + Shape::kInputBytes);
}

// --- tensor-core arithmetic -----------------------------------------------------------------

// What one lane keeps for its tiles: acc[m][n][i] is element (acc_row(i, g), acc_token(i, t))
// of row tile m and token tile n of its warp.
template <class Shape>
struct LaneTiles {
  float acc[Shape::kRowTiles][Shape::kTokenTiles][4];
};

// Block j of a stage into acc: per k-step the A fragments of the lane's row tiles and the split
// B fragments of its token tiles, then all W·hi products, then all W·lo products (independent
// tiles back to back), into per-block accumulators that are scaled by d at the end.
// rows[m][h]: offset of the row buffer of row g + 8h of tile m, plus its lead.
template <class Shape>
__device__ __forceinline__ void accumulate_block(const unsigned char* weights,
                                                 const int (&rows)[Shape::kRowTiles][2],
                                                 const float* token_rows, int j, int t,
                                                 LaneTiles<Shape>& tiles) {
  constexpr int M = Shape::kRowTiles;
  constexpr int N = Shape::kTokenTiles;
  float block[M][N][4];
#pragma unroll
  for (int s = 0; s < layout::kKSteps; ++s) {
    unsigned a[M][4];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      unsigned pairs[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        pairs[h] = *reinterpret_cast<const std::uint16_t*>(weights + rows[m][h] +
                                                           layout::weight_pair_offset(0, j, s, t));
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // Exact in TF32: the integers fit its 11 bits.
        a[m][i] = __float_as_uint(
            q8_weight(pairs[layout::a_row_half(i)] ^ kQ8SignBits, layout::a_pair_byte(i)));
      }
    }
    unsigned hi[N][2];
    unsigned lo[N][2];
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const float2 x = *reinterpret_cast<const float2*>(token_rows + n * 8 * layout::kInputStride +
                                                        layout::input_offset(j, s, t));
      split_tf32(x.x, hi[n][0], lo[n][0]);
      split_tf32(x.y, hi[n][1], lo[n][1]);
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int n = 0; n < N; ++n) {
        if (s == 0) {
#pragma unroll
          for (int i = 0; i < 4; ++i) block[m][n][i] = 0.0f;
        }
        mma_tf32(block[m][n], a[m], hi[n][0], hi[n][1]);
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int n = 0; n < N; ++n) mma_tf32(block[m][n], a[m], lo[n][0], lo[n][1]);
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float d[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      d[h] = __half2float(
          *reinterpret_cast<const __half*>(weights + rows[m][h] + layout::scale_offset(0, j)));
    }
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        tiles.acc[m][n][i] = fmaf(d[layout::acc_row_half(i)], block[m][n][i], tiles.acc[m][n][i]);
      }
    }
  }
}

// Stores the lane's accumulators: rows past out_rows and tokens past T are dropped.
template <class Shape>
__device__ __forceinline__ void store_tiles(const q8::MatvecArgs& a, std::int64_t row0,
                                            std::int64_t token0, int g, int t,
                                            const LaneTiles<Shape>& tiles) {
#pragma unroll
  for (int m = 0; m < Shape::kRowTiles; ++m) {
#pragma unroll
    for (int n = 0; n < Shape::kTokenTiles; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const std::int64_t row = row0 + 16 * m + layout::acc_row(i, g);
        const std::int64_t token = token0 + 8 * n + layout::acc_token(i, t);
        if (row < a.out_rows && token < a.tokens) {
          a.out[token * a.out_stride + row] = tiles.acc[m][n][i];
        }
      }
    }
  }
}

// One tile of rows [row0, row0 + kRows) × tokens [token0, token0 + kTokens).
template <class Shape>
__device__ __forceinline__ void matvec_tile(const q8::MatvecArgs& a, std::int64_t row0,
                                            std::int64_t token0, unsigned char* shared) {
  const int warp = static_cast<int>(threadIdx.x) / kLanes;
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int g = layout::group_of(lane);
  const int t = layout::thread_in_group(lane);
  const int warp_row = (warp % Shape::kWarpsAlongM) * Shape::kRowTiles * 16;
  const int warp_token = (warp / Shape::kWarpsAlongM) * Shape::kTokenTiles * 8;
  const std::int64_t q8_blocks = a.cols / kQ8BlockValues;
  const std::int64_t stages = (q8_blocks + layout::kStageBlocks - 1) / layout::kStageBlocks;
  const bool vectors =
      reinterpret_cast<std::uintptr_t>(a.input) % 16 == 0 && a.input_stride % 4 == 0;

  const TileCopies<Shape> copies(a, row0, token0, vectors);
  __syncthreads();  // the previous tile's stages have been read
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < stages) copy_stage<Shape>(a, copies, token0, s, vectors, shared);
    commit_copies();
  }
  // Row buffer offsets and row starts mod 16 of the lane's rows g + 8h of its row tiles.
  int buffer_of[Shape::kRowTiles][2];
  int lead_of[Shape::kRowTiles][2];
#pragma unroll
  for (int m = 0; m < Shape::kRowTiles; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp_row + 16 * m + 8 * h + g;
      buffer_of[m][h] = r * layout::kRowStride;
      lead_of[m][h] = span_lead(a, row0 + r, 0);
    }
  }
  LaneTiles<Shape> tiles;
#pragma unroll
  for (int m = 0; m < Shape::kRowTiles; ++m) {
#pragma unroll
    for (int n = 0; n < Shape::kTokenTiles; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) tiles.acc[m][n][i] = 0.0f;
    }
  }
  for (std::int64_t k = 0; k < stages; ++k) {
    wait_copies<kStages - 2>();
    __syncthreads();  // stage k is complete, and the buffer of stage k − 1 is free
    if (k + kStages - 1 < stages) {
      copy_stage<Shape>(a, copies, token0, k + kStages - 1, vectors, shared);
    }
    commit_copies();

    const unsigned char* buffer = shared + (k % kStages) * Shape::kStageBytes;
    const std::int64_t first_block = k * layout::kStageBlocks;
    // The stage's span of row r starts at row + 34·first_block.
    const int shift = static_cast<int>(first_block * kQ8BlockBytes % layout::kChunkBytes);
    int rows[Shape::kRowTiles][2];
#pragma unroll
    for (int m = 0; m < Shape::kRowTiles; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        rows[m][h] = buffer_of[m][h] + (lead_of[m][h] + shift) % layout::kChunkBytes;
      }
    }
    const unsigned char* weights = buffer + Shape::kInputBytes;
    const float* token_rows =
        reinterpret_cast<const float*>(buffer) + (warp_token + g) * layout::kInputStride;
    accumulate_block<Shape>(weights, rows, token_rows, 0, t, tiles);
    if (q8_blocks - first_block >= layout::kStageBlocks) {
      accumulate_block<Shape>(weights, rows, token_rows, 1, t, tiles);
    }
  }
  wait_copies<0>();
  store_tiles<Shape>(a, row0 + warp_row, token0 + warp_token, g, t, tiles);
}

template <class Shape>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinBlocks)
    q8_mma_matvec_kernel(const q8::MatvecArgs args) {
  extern __shared__ __align__(16) unsigned char shared[];
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * Shape::kRows;
  const std::int64_t token_tiles = (args.tokens + Shape::kTokens - 1) / Shape::kTokens;
  for (std::int64_t tile = blockIdx.y; tile < token_tiles; tile += gridDim.y) {
    matvec_tile<Shape>(args, row0, tile * Shape::kTokens, shared);
  }
}

template <class Shape>
void launch(const q8::MatvecArgs& args, Stream stream) {
  if constexpr (Shape::kSharedBytes > 48 * 1024) {
    static SharedMemoryOptIn opt_in;
    opt_in.ensure(reinterpret_cast<const void*>(&q8_mma_matvec_kernel<Shape>), Shape::kSharedBytes);
  }
  const std::int64_t token_tiles = (args.tokens + Shape::kTokens - 1) / Shape::kTokens;
  const dim3 grid(static_cast<unsigned>((args.out_rows + Shape::kRows - 1) / Shape::kRows),
                  static_cast<unsigned>(token_tiles < kMaxGridY ? token_tiles : kMaxGridY));
  q8_mma_matvec_kernel<Shape><<<grid, Shape::kThreads, Shape::kSharedBytes, native(stream)>>>(args);
  TD_CUDA_CHECK_LAUNCH("q8_mma_matvec_kernel");
}

}  // namespace

void q8_matvec_mma(const q8::MatvecArgs& args, Stream stream) {
  const std::int64_t prefill_blocks =
      (args.out_rows + PrefillShape::kRows - 1) / PrefillShape::kRows *
      ((args.tokens + PrefillShape::kTokens - 1) / PrefillShape::kTokens);
  if (prefill_blocks >= kPrefillMinBlocks) {
    launch<PrefillShape>(args, stream);
  } else {
    launch<ShortShape>(args, stream);
  }
}

}  // namespace turbodecode::cuda
