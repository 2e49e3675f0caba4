// Where the tensor-core Q8_0 matvec (src/q8/cuda/q8_mma_matvec.cu) keeps things: which columns
// of a Q8_0 block each k index of an mma.m16n8k8 stands for, where a staged weight row's bytes
// lie in shared memory, and which output element each accumulator register holds. Host and
// device code, so that tests/q8_mma_layout_test.cc can emulate one warp's MMAs on the CPU with
// the kernel's own indices.
//
// Roles in mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32 (PTX ISA, "Matrix Fragments for
// mma.m16n8k8"): lane = 4·g + t (g = groupID, t = threadID_in_group). A (16 output rows × 8 k,
// the weights) a0 = (g, t), a1 = (g + 8, t), a2 = (g, t + 4), a3 = (g + 8, t + 4); B (8 k × 8
// tokens, the inputs) b0 = (t, g), b1 = (t + 4, g); C (16 rows × 8 tokens) c0 = (g, 2t),
// c1 = (g, 2t + 1), c2 = (g + 8, 2t), c3 = (g + 8, 2t + 1).
#pragma once

#include "common/host_device.h"
#include "turbodecode/q8.h"

namespace turbodecode::q8::mma {

inline constexpr int kStageBlocks = 2;  // Q8_0 blocks per pipeline stage
inline constexpr int kStageCols = kStageBlocks * kQ8BlockValues;
inline constexpr int kKSteps = kQ8BlockValues / 8;  // m16n8k8 steps per block
inline constexpr int kChunkBytes = 16;

// A stage of a weight row is the span [start, start + 68) (start = row + 34·first_block, only
// 2-byte aligned). It is copied as whole 16-byte chunks from start − lead, lead = start mod 16
// (≤ 14): at most 6 chunks. The lead bytes before the span belong to the same allocation when
// the allocation starts on a 16-byte boundary (cudaMalloc: 256), and are never used.
inline constexpr int kRowChunks =
    (kChunkBytes - 2 + kStageBlocks * kQ8BlockBytes + kChunkBytes - 1) / kChunkBytes;
// Row buffers 112 bytes (28 banks) apart: the 8 rows one weight load reads (rows g of a tile)
// start 4 banks apart, and each reads at most 3 consecutive words (4 lanes × 2 bytes at a
// 2-byte offset), so rows with the same lead never share a bank.
inline constexpr int kRowStride = 112;
static_assert(kRowStride >= kRowChunks * kChunkBytes && kRowStride % kChunkBytes == 0);
// Staged inputs: rows of kStageCols floats, kInputStride floats apart (16-byte aligned for
// cp.async). A float2 load of lanes 4g + t reads words 72g + 2t (+ 1): the 16 lanes of a
// half-warp cover 32 distinct banks.
inline constexpr int kInputStride = kStageCols + 8;
static_assert(kInputStride % 4 == 0 && kInputStride % 32 == 8);

TD_HOST_DEVICE constexpr int group_of(int lane) {
  return lane >> 2;
}
TD_HOST_DEVICE constexpr int thread_in_group(int lane) {
  return lane & 3;
}

// The k order. k-step s of a block covers its columns 8s .. 8s + 7: k = t stands for column
// 8s + 2t and k = t + 4 for column 8s + 2t + 1, so a lane's two A elements of a row are one
// weight pair (a 2-byte load) and its two B elements of a token one float2. Any order gives the
// same dot product as long as A and B agree; this one needs the fewest loads.
TD_HOST_DEVICE constexpr int column_of_k(int k_step, int k) {
  return 8 * k_step + 2 * (k & 3) + (k >> 2);
}

// Number of bytes chunk c of a staged row holds (start − lead + 16c onwards, up to the span's
// end); ≤ 0: the chunk holds nothing of this stage.
TD_HOST_DEVICE constexpr int chunk_bytes(int lead, int blocks, int chunk) {
  const int left = lead + blocks * kQ8BlockBytes - kChunkBytes * chunk;
  return left < kChunkBytes ? left : kChunkBytes;
}

// Byte offsets in a staged row buffer (lead = the row span's start mod 16) of block j's f16
// scale and of the weight pair of lane-in-group t at k-step s: its low byte is column
// column_of_k(s, t), its high byte column_of_k(s, t + 4).
TD_HOST_DEVICE constexpr int scale_offset(int lead, int block) {
  return lead + block * kQ8BlockBytes;
}
TD_HOST_DEVICE constexpr int weight_pair_offset(int lead, int block, int k_step, int t) {
  return scale_offset(lead, block) + 2 + 8 * k_step + 2 * t;
}
// Column in the stage of the first of lane-in-group t's float2 inputs at k-step s of block j.
TD_HOST_DEVICE constexpr int input_offset(int block, int k_step, int t) {
  return block * kQ8BlockValues + column_of_k(k_step, t);
}

// A register i of lane (g, t): row g + 8·a_row_half(i) of the tile, from byte a_pair_byte(i)
// of that row's weight pair (0: k = t, 1: k = t + 4).
TD_HOST_DEVICE constexpr int a_row_half(int i) {
  return i & 1;
}
TD_HOST_DEVICE constexpr int a_pair_byte(int i) {
  return i >> 1;
}
// B register i of lane (g, t): token g, element i of the float2 (k = t + 4i).

// Accumulator register i of lane (g, t): row g + 8·acc_row_half(i) of the 16-row tile, token
// acc_token(i, t) of the 8-token tile.
TD_HOST_DEVICE constexpr int acc_row_half(int i) {
  return i >> 1;
}
TD_HOST_DEVICE constexpr int acc_row(int i, int g) {
  return g + 8 * acc_row_half(i);
}
TD_HOST_DEVICE constexpr int acc_token(int i, int t) {
  return 2 * t + (i & 1);
}

}  // namespace turbodecode::q8::mma
