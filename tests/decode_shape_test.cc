// The decode kernel's shared-memory layout (src/attention/cuda/decode_shape.h), on the CPU, for
// every instance the dispatch can pick: it fits the SM, keeps the blocks it is built for,
// aligns what the copies and vector loads need, and lays V rows out so the tensor-core value
// pass loads its codes without bank conflicts.
#include <gtest/gtest.h>

#include <string>

#include "attention/cuda/decode_shape.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::cuda::decode {
namespace {

constexpr RowFormat kKFormats[] = {RowFormat::f16, RowFormat::fp8, RowFormat::tq4, RowFormat::tq8};

template <class Check>
void for_each_instance(Check check) {
  for (int d : {256, 512}) {
    for (int columns : {2, 8}) {
      for (RowFormat k : kKFormats) {
        for (RowFormat v : kRowFormats) {
          const DecodeShape s(d, columns, k, v);
          SCOPED_TRACE("D=" + std::to_string(d) + " columns=" + std::to_string(columns) +
                       " K=" + format_name(k) + " V=" + format_name(v));
          check(s);
        }
      }
    }
  }
}

TEST(DecodeShape, EveryInstanceFitsAndIsAligned) {
  for_each_instance([](const DecodeShape& s) {
    EXPECT_LE(s.shared_bytes + kSharedBytesReservedPerBlock, kSharedBytesPerSm);
    EXPECT_GE(s.resident_blocks(), 1);
    EXPECT_LE(s.resident_blocks(), blocks_per_sm_by_shared(s.shared_bytes));
    EXPECT_EQ(32 % s.tile, 0) << "tiles divide every chunk";
    EXPECT_EQ(s.tile % 16, 0) << "whole mma blocks";
    EXPECT_EQ(s.k_row_bytes % 16, 0);
    EXPECT_EQ(s.v_row_bytes % 16, 0);
    EXPECT_EQ(s.v_pitch % 16, 0);
    EXPECT_EQ(s.stage_bytes % 16, 0);
    EXPECT_LE(s.tile, 32) << "a lane of the copy warp per row";
    EXPECT_EQ(s.k_pitch % 128, 16) << "8 staged K rows start in 8 bank quarters";
    EXPECT_EQ(s.stage_k % 16 + s.stage_v % 16 + s.stage_k_scales % 16, 0) << "bulk copies";
    EXPECT_EQ(s.partial_offset % 16, 0);
    EXPECT_EQ(s.weight_offset % 16, 0);
    EXPECT_EQ(s.barrier_offset % 8, 0);
    EXPECT_EQ(s.pairs, s.tile * s.columns);
    EXPECT_GE(s.pairs_per_thread * kComputeThreads, s.pairs);
  });
}

// The tile depends on the head dim alone (the online softmax rescales per tile: a row must be
// cut the same way whatever the columns beside it, for bitwise batch and run invariance).
TEST(DecodeShape, TileDependsOnTheHeadDimOnly) {
  for (RowFormat k : kKFormats) {
    for (RowFormat v : kRowFormats) {
      for (int d : {256, 512}) {
        EXPECT_EQ(DecodeShape(d, 2, k, v).tile, DecodeShape(d, 8, k, v).tile);
      }
    }
  }
}

// The tensor-core value pass's code loads take no more wavefronts than their words need
// (lanes of a phase × words / 32 banks), at the pitch the shape chose.
TEST(DecodeShape, ValueCodeLoadsAreConflictFree) {
  for_each_instance([](const DecodeShape& s) {
    if (s.v_tile == VTile::f16) return;
    const int bits = s.v_row_bytes * 8 / s.head_dim;
    const int run_bytes = s.value_run() * bits / 8;
    const int words = (run_bytes + 3) / 4 + 1;
    const int lanes = words >= 4 ? 8 : 16;
    const int ideal = (lanes * words + 31) / 32;
    EXPECT_LE(s.value_load_wavefronts(s.v_pitch), ideal + 1) << "pitch " << s.v_pitch;
  });
}

// The model itself: rows a multiple of 128 bytes apart put the four rows of a load phase on the
// same banks (the conflict the pitch search avoids).
TEST(DecodeShape, BankModelSeesConflictsOfAlignedRows) {
  const DecodeShape s(256, 2, RowFormat::f16, RowFormat::tq8);
  EXPECT_GT(s.value_load_wavefronts(256), s.value_load_wavefronts(s.v_pitch));
}

}  // namespace
}  // namespace turbodecode::cuda::decode
