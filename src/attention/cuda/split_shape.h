// Geometry of the split kernel (one block per query, KV head, head chunk and split): tile
// size, pipeline depth and shared-memory layout. Constexpr so the kernel uses it at compile
// time and the split policy at run time, from one definition; host-safe, so host tests check
// it (tests/split_layout_test.cc).
#pragma once

#include <cstdint>

#include "attention/cuda/codebook_layout.h"
#include "attention/cuda/row_codec.h"
#include "common/host_device.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::cuda::decode {

// Compute warps of a block (they own the head dimension's quarters), and the block with its
// copy warp, which alone streams the tiles into the pipeline's stages.
inline constexpr int kSplitWarps = 4;
inline constexpr int kSplitThreads = kSplitWarps * 32;
inline constexpr int kSplitBlockThreads = kSplitThreads + 32;
// Shared memory of an SM on sm_90 and what the system reserves per resident block: how the
// tile is sized for a number of resident blocks.
inline constexpr int kSharedBytesPerSm = 228 * 1024;
inline constexpr int kSharedBytesReservedPerBlock = 1024;
// Resident blocks per SM the tile is sized for. With two (8 warps) the schedulers of the
// D 256 tq8-V kernel found no eligible warp 57% of the time (Nsight Compute, H200) and DRAM
// ran at 63%; with three, one block's lookups and softmax overlap the others' copies. The
// lane V table then drops to 16 copies where that fits one block more (v_copies).
inline constexpr int kTargetBlocksPerSm = 3;
// Heads per block from which P·V runs on tensor cores (values.cuh): below, CUDA-core FMAs
// (one per element, head and position) cost less than the fragment packing.
inline constexpr int kMinHeadsForTensorCoreValues = 2;
// Bytes added between staged V rows for the tensor-core V pass (see SplitShape's constructor).
inline constexpr int kTensorCoreVRowPad = 16;

TD_HOST_DEVICE_CONSTEXPR int blocks_per_sm_by_shared(int shared_bytes) {
  return kSharedBytesPerSm / (shared_bytes + kSharedBytesReservedPerBlock);
}

TD_HOST_DEVICE_CONSTEXPR int row_bytes_of(RowCodec codec, int head_dim) {
  return codec == RowCodec::f16 ? 2 * head_dim
                                : (codec == RowCodec::tq_byte ? head_dim : head_dim / 2);
}

struct SplitShape {
  int head_dim;
  int heads;          // query heads per block (power of two, <= 8)
  int lane_elements;  // D / 128: elements of a row each thread owns
  int tile;           // positions per pipeline stage (a power of two dividing kSplitAlign)
  int pairs;          // tile * heads scores per tile
  int reduce_width;   // pairs rounded up to a warp: values each lane reduces per tile
  int stages;         // pipeline depth: 3, or 2 for a larger TQ-V tile
  int norms_per_row;
  VLookup v_lookup;  // how V codes become codebook values (codebook_lookup.cuh)
  int v_copies;      // replicas of a lane table: 32, or 16 where that fits another block
  int weight_sets;   // TQ V: one set of softmax weights per row norm (row scale folded in), else 1
  bool tensor_core_scores;  // F16 K: q·K by mma.sync (scores.cuh), else per-thread FMAs
  bool tensor_core_values;  // one-byte TQ V, 2+ heads, 16-row tiles: P·V by mma.sync (values.cuh)
  int k_row_bytes;
  int k_pitch;      // bytes between staged K rows
  bool k_swizzled;  // F16 K: 16-byte chunks staged at swizzled_chunk (mma fragments, scores.cuh)
  int v_row_bytes;
  int v_pitch;                     // bytes between staged V rows (see the constructor)
  int k_norm_bytes, v_norm_bytes;  // per row, 0 for F16
  // Byte offsets inside one stage, then of each shared region.
  int stage_k, stage_v, stage_k_norms, stage_v_norms, stage_bytes;
  bool q_in_last_stage;  // the query rows share the last stage (see lay_out)
  int q_offset, partial_offset, weight_offset, rescale_offset, k_codebook_offset, v_codebook_offset,
      barrier_offset, shared_bytes;

  TD_HOST_DEVICE_CONSTEXPR SplitShape(int d, int h, RowCodec k_codec, RowCodec v_codec)
      : head_dim(d),
        heads(h),
        lane_elements(d / kSplitThreads),
        tile(0),
        pairs(0),
        reduce_width(0),
        stages(3),
        norms_per_row(d == 512 ? 2 : 1),
        v_lookup(v_codec == RowCodec::f16
                     ? VLookup::none
                     : (v_codec == RowCodec::tq_nibble ? VLookup::plain : VLookup::lane)),
        v_copies(v_lookup == VLookup::lane ? kBanks : 0),
        weight_sets(v_codec == RowCodec::f16 ? 1 : norms_per_row),
        tensor_core_scores(k_codec == RowCodec::f16),
        tensor_core_values(false),
        k_row_bytes(row_bytes_of(k_codec, d)),
        k_pitch(row_bytes_of(k_codec, d)),
        k_swizzled(k_codec == RowCodec::f16),
        v_row_bytes(row_bytes_of(v_codec, d)),
        v_pitch(row_bytes_of(v_codec, d)),
        k_norm_bytes(k_codec == RowCodec::f16 ? 0 : 4 * (d == 512 ? 2 : 1)),
        v_norm_bytes(v_codec == RowCodec::f16 ? 0 : 4 * (d == 512 ? 2 : 1)),
        stage_k(0),
        stage_v(0),
        stage_k_norms(0),
        stage_v_norms(0),
        stage_bytes(0),
        q_in_last_stage(false),
        q_offset(0),
        partial_offset(0),
        weight_offset(0),
        rescale_offset(0),
        k_codebook_offset(0),
        v_codebook_offset(0),
        barrier_offset(0),
        shared_bytes(0) {
    choose_tile();
    tensor_core_values =
        v_lookup == VLookup::lane && heads >= kMinHeadsForTensorCoreValues && tile % 16 == 0;
    // The tensor-core V pass (values.cuh) reads the codes of rows t, t + 2, t + 4, t + 6 at
    // the same columns in one load phase: 8 bytes per lane, half a warp per phase, at D 256;
    // 16 bytes, a quarter warp, at D 512. With a row pitch that is a multiple of 128 bytes all
    // four rows fall on the same banks: 4-way conflicts on every code load (Nsight Compute,
    // H200, 16/8 D 256 B = 64 L = 4K: 8 wavefronts per load instead of 2, 12.6 M of the split
    // kernel's 30.3 M excess wavefronts). A 16-byte pad moves row t + 2 32 bytes along the
    // banks and makes them conflict-free at both sizes (tests/split_layout_test.cc): 435.7 →
    // 414.9 µs there. Taken only where it costs nothing but bytes: the same tile, stages,
    // table copies and blocks per SM as without it.
    if (tensor_core_values) {
      SplitShape padded = *this;
      padded.v_pitch = v_row_bytes + kTensorCoreVRowPad;
      padded.choose_tile();
      if (padded.tile == tile && padded.stages == stages && padded.v_copies == v_copies &&
          blocks_per_sm_by_shared(padded.shared_bytes) >= blocks_per_sm_by_shared(shared_bytes)) {
        *this = padded;
      }
    }
  }

  // Blocks per SM the kernel is compiled for (its register cap): what shared memory allows,
  // at most 4 (16 compute warps hide the per-tile chain; more would squeeze registers for
  // nothing). The FMA scorer (TQ K) keeps every head's q slice and partial sums in registers:
  // with 4 or more heads the 4-block cap (96 per thread) made ptxas spill 28–408 bytes, and
  // with 32 q values per thread (D 512, 8 heads) the 3-block cap (136) too; those instances
  // are compiled for fewer blocks.
  TD_HOST_DEVICE_CONSTEXPR int resident_blocks() const {
    const int by_shared = blocks_per_sm_by_shared(shared_bytes);
    const int by_registers =
        tensor_core_scores ? 4 : (heads * lane_elements >= 32 ? 2 : (heads >= 4 ? 3 : 4));
    return by_shared < by_registers ? by_shared : by_registers;
  }

 private:
  // The tile, the pipeline depth and the lane table's copies, and every offset that follows.
  TD_HOST_DEVICE_CONSTEXPR void choose_tile() {
    // The FMA path keeps at most 64 scores per tile (registers of its reduction); the mma
    // path needs whole 16-row blocks and at most 128 scores (8 head columns).
    const int max_pairs = tensor_core_scores ? 128 : 64;
    const int min_tile = tensor_core_scores ? 16 : 8;
    int max_tile = 32;
    while (max_tile > min_tile && max_tile * heads > max_pairs) max_tile /= 2;
    // The largest tile that leaves kTargetBlocksPerSm blocks per SM, three stages deep, else
    // the smallest (D 512 with F16 K: 16 rows of over 1 KB per stage). With TQ V a tile larger
    // than three stages allow may take two: two stages of 32 positions hold as many bytes in
    // flight as three of 16, with half the per-tile chains (16/8 D 256 tq8, same-call A/B,
    // session 12: B = 1 L = 4K −15%, B = 32 L = 8K −6%, B = 64 L = 4K −4%). Two stages of the
    // same tile measured worse (16/2 D 512 tq8, two stages for a third block: B = 1 L = 32K
    // +17%, B = 8 +10%), and the F16-V instances at 32 positions spill. The lane V table counts
    // at 16 copies here; 32 are taken below where they fit.
    if (v_lookup == VLookup::lane) v_copies = kBanks / 2;
    const auto fits = [&](int t, int depth) {
      stages = depth;
      lay_out(t);
      return blocks_per_sm_by_shared(shared_bytes) >= kTargetBlocksPerSm;
    };
    bool found = false;
    for (int t = max_tile; t >= min_tile && !found; t /= 2) {
      found = fits(t, 3) || (t > min_tile && v_lookup != VLookup::none && fits(t, 2));
    }
    if (!found) fits(min_tile, 3);
    // The full lane table (32 copies, one wavefront per lookup) where it costs no block, for
    // 32-position tiles on two stages if three leave no room for it; else half of it, for
    // one more block per SM: more warps to hide the per-tile chain, for about one more
    // wavefront per lookup. Two stages with the full table measured better than three with
    // the half (16/8 D 256 K tq8 V tq8, same-call A/B, session 13: B = 1 L = 32K −8%, B = 8
    // −7%), where the plain K table's conflicts add to the lookups' wavefronts. Smaller tiles
    // keep their stages (two of 16 positions measured worse, above).
    if (v_lookup == VLookup::lane) {
      const int blocks = blocks_per_sm_by_shared(shared_bytes);
      const int depth = stages;
      v_copies = kBanks;
      lay_out(tile);
      if (blocks_per_sm_by_shared(shared_bytes) < blocks && depth == 3 && tile == 32) {
        stages = 2;
        lay_out(tile);
      }
      if (blocks_per_sm_by_shared(shared_bytes) < blocks) {
        v_copies = kBanks / 2;
        stages = depth;
        lay_out(tile);
      }
    }
  }

  // The tile size and every offset that follows from it.
  TD_HOST_DEVICE_CONSTEXPR void lay_out(int t) {
    tile = t;
    pairs = tile * heads;
    reduce_width = pairs < 32 ? 32 : pairs;
    stage_k = 0;
    stage_v = stage_k + tile * k_pitch;
    stage_k_norms = stage_v + tile * v_pitch;
    stage_v_norms = stage_k_norms + tile * k_norm_bytes;
    stage_bytes = stage_v_norms + tile * v_norm_bytes;
    // The scorers copy the query rows into registers before they release the last stage
    // for its first fill (the copy warp fills the others meanwhile), so the rows live in that
    // stage when they fit: 16 KB less at D 512 with 8 heads, which lets
    // two blocks share an SM where F16 V left room for one.
    q_in_last_stage = heads * head_dim * 4 <= stage_bytes;
    q_offset = (q_in_last_stage ? stages - 1 : stages) * stage_bytes;
    partial_offset = stages * stage_bytes + (q_in_last_stage ? 0 : heads * head_dim * 4);
    weight_offset = partial_offset + kSplitWarps * reduce_width * 4;
    rescale_offset = weight_offset + weight_sets * pairs * 4;
    k_codebook_offset = rescale_offset + 16 * 4;
    v_codebook_offset = k_codebook_offset + (tensor_core_scores ? 0 : kCodebookEntries * 4);
    // A full and an empty barrier per stage (8 bytes each, 8-byte aligned).
    barrier_offset = (v_codebook_offset + codebook_bytes(v_lookup, v_copies) + 7) / 8 * 8;
    shared_bytes = barrier_offset + 2 * stages * 8;
  }
};

// Where a staged K row keeps its 16-byte chunk c when rows are swizzled: at c ^ (r mod 8) for
// row r, inside the same 128-byte line. The tensor-core scorer's 8 rows per fragment load then
// hit 32 distinct banks with rows packed at their own size; a padded pitch (the earlier way)
// left every staged copy straddling two 128-byte lines, which split each cp.async request and
// cost 1.5× the L2 sectors of the K rows (Nsight Compute, H200).
TD_HOST_DEVICE_CONSTEXPR int swizzled_chunk(int chunk, int row) {
  return chunk ^ (row & 7);
}

// Where a thread's elements of a row are: warp w owns quarter w of the head dimension, lane l
// elements [l·E, l·E + E) of it (E = D / 128).
struct LaneSlice {
  int warp, lane;
  int first;  // first element
  int part;   // the D = 512 half (and norm) holding the elements

  TD_HOST_DEVICE_CONSTEXPR LaneSlice(int head_dim, int thread)
      : warp(thread / 32),
        lane(thread % 32),
        first(warp * (head_dim / kSplitWarps) + lane * (head_dim / kSplitThreads)),
        part(first / 256) {}
};

inline RowCodec codec_of(RowFormat format) {
  switch (format) {
    case RowFormat::f16:
      return RowCodec::f16;
    case RowFormat::tq4:
      return RowCodec::tq_nibble;
    default:
      return RowCodec::tq_byte;
  }
}

// Query heads one block serves: the GQA group rounded up to a power of two (padding heads
// are zero queries whose results are dropped), at most 8; larger groups take several blocks.
inline int heads_per_block(int group) {
  int heads = 1;
  while (heads < group && heads < 8) heads *= 2;
  return heads;
}

}  // namespace turbodecode::cuda::decode
