// Geometry of the decode kernel: tile size, pipeline depth and shared-memory layout of one
// instance (head dim, query columns per block, K and V row formats). Constexpr, so the kernel
// uses it at compile time and the planner at run time from one definition; host-safe, so host
// tests check it (tests/decode_shape_test.cc).
#pragma once

#include <cstdint>

#include "attention/cuda/tile_formats.h"
#include "common/host_device.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::cuda::decode {

// Compute warps of a block (each owns a quarter of the head dimension) and the block with its
// copy warp, which alone streams the tiles into the pipeline's stages.
inline constexpr int kComputeWarps = 4;
inline constexpr int kComputeThreads = kComputeWarps * 32;
inline constexpr int kBlockThreads = kComputeThreads + 32;
// Shared memory of an SM on sm_90 and what the system reserves per resident block.
inline constexpr int kSharedBytesPerSm = 228 * 1024;
inline constexpr int kSharedBytesReservedPerBlock = 1024;
// Resident blocks per SM the stages are sized for: with two (8 compute warps) the schedulers
// find too few eligible warps to overlap one block's per-tile chain with the others' copies.
inline constexpr int kTargetBlocksPerSm = 3;
// Query columns one block serves at most: the n = 8 of the tensor-core tiles.
inline constexpr int kMaxColumns = 8;
// The block's control region (decode_kernel.cuh): its control words, then the work-list part
// its share starts in (a RunPart, work_list.cuh), 8-byte aligned like what follows.
inline constexpr int kControlWordBytes = 16;
inline constexpr int kControlBytes = kControlWordBytes + 96;

TD_HOST_DEVICE_CONSTEXPR int blocks_per_sm_by_shared(int shared_bytes) {
  return kSharedBytesPerSm / (shared_bytes + kSharedBytesReservedPerBlock);
}

// Positions per tile. A function of the head dim alone (not of the columns a block serves),
// because the tile is where the online softmax rescales: a query row must be cut into the same
// tiles whether it runs alone, in a draft of several tokens, or beside other heads, so its
// result is bitwise the same (SPEC §2.6, §2.8). It divides every chunk (chunks.h: multiples of
// 32 positions).
TD_HOST_DEVICE_CONSTEXPR int tile_positions(int head_dim) { return head_dim == 256 ? 32 : 16; }

// Shared-memory banks: how many 4-byte words a warp-wide load of `words_per_lane` consecutive
// words at the given byte addresses spends beyond one per distinct word group (conflicts).
// Used to pick the V row pitch of the tensor-core value pass (value_loads below).
struct BankModel {
  static constexpr int kBanks = 32;

  // Wavefronts of one load phase: lanes [first, first + count) each reading `words` words at
  // byte address[lane]; the hardware serves 128 bytes per wavefront, distinct words of one bank
  // in different wavefronts.
  TD_HOST_DEVICE_CONSTEXPR static int wavefronts(const int* address, int first, int count,
                                                 int words) {
    int worst = 0;
    for (int bank = 0; bank < kBanks; ++bank) {
      int distinct[32 * 4] = {};
      int n = 0;
      for (int lane = first; lane < first + count; ++lane) {
        for (int w = 0; w < words; ++w) {
          const int word = address[lane] / 4 + w;
          if (word % kBanks != bank) continue;
          bool seen = false;
          for (int k = 0; k < n; ++k) seen = seen || distinct[k] == word;
          if (!seen) distinct[n++] = word;
        }
      }
      worst = n > worst ? n : worst;
    }
    return worst;
  }
};

struct DecodeShape {
  int head_dim;
  int columns;        // query columns (token, head pairs) per block: 2, 4 or 8
  int tile;           // positions per pipeline stage
  int pairs;          // tile · columns scores per tile
  int pairs_per_thread;
  int stages;         // pipeline depth
  KTile k_tile;
  VTile v_tile;
  int k_row_bytes, v_row_bytes;
  int k_pitch, v_pitch;        // bytes between staged rows
  int k_scales, v_scales;      // f32 side values per row (FP8 scale, TQ norms)
  int weight_sets;             // one weight set per V scale part (D = 512 TQ: two halves)
  int k_table_entries, v_table_entries;  // codebook entries staged (0: none)
  int v_table_copies;          // bank copies of the V lane table
  bool shared_table;           // K and V read one table (both TQ of one width)
  // Byte offsets inside one stage, then of each shared region.
  int stage_k, stage_v, stage_k_scales, stage_v_scales, stage_bytes;
  int q_offset, q_bytes;  // rotated query rows (TQ K only)
  int partial_offset, weight_offset, rescale_offset, merge_offset, k_table_offset,
      v_table_offset, control_offset, barrier_offset, shared_bytes;

  TD_HOST_DEVICE_CONSTEXPR DecodeShape(int d, int c, RowFormat k_format, RowFormat v_format)
      : head_dim(d),
        columns(c),
        tile(tile_positions(d)),
        pairs(tile * c),
        pairs_per_thread((tile * c + kComputeThreads - 1) / kComputeThreads),
        stages(3),
        k_tile(k_tile_of(k_format)),
        v_tile(v_tile_of(v_format)),
        k_row_bytes(static_cast<int>(stored_row_bytes(k_format, d))),
        v_row_bytes(static_cast<int>(stored_row_bytes(v_format, d))),
        // Rows of a multiple of 128 bytes, padded by 16: the 8 rows of a fragment load then
        // start in 8 different bank quarters, and a bulk copy (16-byte granules) still
        // writes each row whole.
        k_pitch(static_cast<int>(stored_row_bytes(k_format, d)) + 16),
        v_pitch(static_cast<int>(stored_row_bytes(v_format, d))),
        k_scales(side_values(k_format, d)),
        v_scales(side_values(v_format, d)),
        weight_sets(v_tile == VTile::tq && d == 512 ? 2 : 1),
        k_table_entries(k_tile == KTile::tq ? 1 << code_bits(k_format) : 0),
        v_table_entries(v_tile == VTile::tq ? 1 << code_bits(v_format) : 0),
        v_table_copies(32),  // halved by choose_stages where that keeps a block
        shared_table(k_tile == KTile::tq && v_tile == VTile::tq &&
                     code_bits(k_format) == code_bits(v_format)),
        stage_k(0),
        stage_v(0),
        stage_k_scales(0),
        stage_v_scales(0),
        stage_bytes(0),
        q_offset(0),
        q_bytes(k_tile == KTile::tq ? c * d * 4 : 0),
        partial_offset(0),
        weight_offset(0),
        rescale_offset(0),
        merge_offset(0),
        k_table_offset(0),
        v_table_offset(0),
        control_offset(0),
        barrier_offset(0),
        shared_bytes(0) {
    if (v_tile != VTile::f16) v_pitch = best_v_pitch();
    choose_stages();
  }

  // Blocks per SM the kernel is compiled for (its register cap): what shared memory allows,
  // at most 3 (136 registers a thread), 2 for D 512 with 8 columns (its accumulators and query
  // fragments need more than 136).
  TD_HOST_DEVICE_CONSTEXPR int resident_blocks() const {
    const int by_shared = blocks_per_sm_by_shared(shared_bytes);
    return by_shared < register_blocks() ? by_shared : register_blocks();
  }
  TD_HOST_DEVICE_CONSTEXPR int register_blocks() const {
    return head_dim == 512 && columns == 8 ? 2 : kTargetBlocksPerSm;
  }

  // Elements of a lane group's run in the tensor-core value pass (values.cuh): row g of mma
  // block b is element 2b of the run, row g + 8 element 2b + 1.
  TD_HOST_DEVICE_CONSTEXPR int value_run() const { return 2 * (head_dim / kComputeWarps / 16); }

  // Shared-memory wavefronts of one code load of the tensor-core value pass at V pitch `pitch`:
  // lane (group g, pair i) of warp 0 reads the words holding its run's codes of position
  // 2i + j (j = 0, 1, 8, 9: one load each; the worst of them).
  TD_HOST_DEVICE_CONSTEXPR int value_load_wavefronts(int pitch) const {
    const int bits = v_row_bytes * 8 / head_dim;
    const int run_bytes = value_run() * bits / 8;
    const int words = (run_bytes + 3) / 4 + 1;  // aligned down, plus the word it may spill into
    int worst = 0;
    const int rows[4] = {0, 1, 8, 9};
    for (int r = 0; r < 4; ++r) {
      int address[32] = {};
      for (int lane = 0; lane < 32; ++lane) {
        const int group = lane / 4;
        const int row = 2 * (lane % 4) + rows[r];
        const int first_byte = group * value_run() * bits / 8;
        address[lane] = row * pitch + first_byte / 4 * 4;
      }
      // A quarter warp per phase for 16-byte loads, else half a warp (as the hardware splits
      // wide loads).
      const int lanes_per_phase = words >= 4 ? 8 : 16;
      for (int first = 0; first < 32; first += lanes_per_phase) {
        const int w = BankModel::wavefronts(address, first, lanes_per_phase, words);
        worst = w > worst ? w : worst;
      }
    }
    return worst;
  }

 private:
  // The V pitch with the fewest conflicts among the row size and 16, 32, 48 bytes more.
  TD_HOST_DEVICE_CONSTEXPR int best_v_pitch() const {
    int best = v_row_bytes;
    int best_wavefronts = value_load_wavefronts(best);
    for (int pad = 16; pad <= 48; pad += 16) {
      const int w = value_load_wavefronts(v_row_bytes + pad);
      if (w < best_wavefronts) {
        best = v_row_bytes + pad;
        best_wavefronts = w;
      }
    }
    return best;
  }

  // Three stages where the blocks registers allow fit with them, else two (the copies then
  // have one tile in flight while one is consumed), and the 8-bit V lane table halved where
  // that keeps a block.
  TD_HOST_DEVICE_CONSTEXPR void choose_stages() {
    stages = 3;
    lay_out();
    if (blocks_per_sm_by_shared(shared_bytes) >= register_blocks()) return;
    stages = 2;
    lay_out();
    if (blocks_per_sm_by_shared(shared_bytes) >= register_blocks()) return;
    if (v_table_entries == 256) {
      v_table_copies = 16;
      lay_out();
    }
  }

  TD_HOST_DEVICE_CONSTEXPR void lay_out() {
    stage_k = 0;
    stage_v = stage_k + tile * k_pitch;
    stage_k_scales = stage_v + tile * v_pitch;
    stage_v_scales = stage_k_scales + tile * k_scales * 4;
    stage_bytes = (stage_v_scales + tile * v_scales * 4 + 15) / 16 * 16;
    q_offset = stages * stage_bytes;
    partial_offset = q_offset + q_bytes;
    weight_offset = partial_offset + kComputeWarps * pairs * 4;
    rescale_offset = weight_offset + weight_sets * pairs * 4;
    // The merge's partial O row (chunk_merge.cuh), passed from warp to warp.
    merge_offset = rescale_offset + kMaxColumns * 4;
    k_table_offset = merge_offset + head_dim * 4;
    // K codes are looked up in a lane table too (scores.cuh), of 32 copies unless K and V share
    // one table.
    const int k_table_bytes = shared_table ? 0 : k_table_entries * 32 * 4;
    v_table_offset = k_table_offset + k_table_bytes;
    const int v_table_bytes = v_table_entries * v_table_copies * 4;
    control_offset = v_table_offset + v_table_bytes;
    barrier_offset = control_offset + kControlBytes;
    shared_bytes = barrier_offset + 2 * stages * 8;
  }
};

}  // namespace turbodecode::cuda::decode
