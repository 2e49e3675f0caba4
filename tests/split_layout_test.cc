// The split kernel's shared-memory layout (src/attention/cuda/split_shape.h), on the CPU, for
// every compiled instance: it fits the SM with the blocks it is compiled for, its regions are
// aligned for the copies that fill them, and the tensor-core V pass's code loads (addresses
// written out here independently of values.cuh) meet the bank pattern the layout is padded for.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "attention/cuda/split_shape.h"

namespace turbodecode {
namespace {

using cuda::decode::RowCodec;
using cuda::decode::SplitShape;

struct Instance {
  int head_dim, heads;
  RowCodec k, v;
};

std::vector<Instance> every_instance() {
  std::vector<Instance> all;
  for (int d : {256, 512}) {
    for (int heads : {1, 2, 4, 8}) {
      for (RowCodec k : {RowCodec::f16, RowCodec::tq_byte, RowCodec::tq_nibble}) {
        for (RowCodec v : {RowCodec::f16, RowCodec::tq_byte, RowCodec::tq_nibble}) {
          all.push_back({d, heads, k, v});
        }
      }
    }
  }
  return all;
}

std::string describe(const Instance& i) {
  std::ostringstream text;
  text << "D" << i.head_dim << " heads " << i.heads << " K codec " << static_cast<int>(i.k)
       << " V codec " << static_cast<int>(i.v);
  return text.str();
}

TEST(SplitLayout, EveryInstanceFitsAndIsAligned) {
  for (const Instance& i : every_instance()) {
    SCOPED_TRACE(describe(i));
    const SplitShape s(i.head_dim, i.heads, i.k, i.v);
    EXPECT_GE(s.resident_blocks(), 1);
    EXPECT_LE(s.resident_blocks() * (s.shared_bytes + cuda::decode::kSharedBytesReservedPerBlock),
              cuda::decode::kSharedBytesPerSm);
    EXPECT_TRUE(s.stages == 2 || s.stages == 3) << s.stages;
    // 16-byte cp.async destinations: every stage, K and V row and chunk.
    EXPECT_EQ(s.stage_bytes % 16, 0);
    EXPECT_EQ(s.stage_v % 16, 0);
    EXPECT_EQ(s.k_pitch % 16, 0);
    EXPECT_EQ(s.v_pitch % 16, 0);
    EXPECT_GE(s.v_pitch, s.v_row_bytes);
    // 4-byte norm copies, 8-byte barriers.
    EXPECT_EQ(s.stage_k_norms % 4, 0);
    EXPECT_EQ(s.stage_v_norms % 4, 0);
    EXPECT_EQ(s.barrier_offset % 8, 0);
    EXPECT_LE(s.barrier_offset + 2 * s.stages * 8, s.shared_bytes);
  }
}

// The lane V table at half its copies only where the full table (32 copies) would cost a
// block per SM: on the instance's own stages, and for a 32-position tile on three stages, on
// two stages as well (split_shape.h: measured better than three stages with the half table).
// The full table's bytes are worked out here from the half table's layout: 16 more copies of
// 256 entries, and one stage and its two barriers fewer.
TEST(SplitLayout, HalfLaneTableOnlyWhereTheFullOneCostsABlock) {
  using cuda::decode::blocks_per_sm_by_shared;
  constexpr int kExtraCopiesBytes = cuda::decode::kCodebookEntries * (cuda::decode::kBanks / 2) * 4;
  int halved = 0;
  for (const Instance& i : every_instance()) {
    const SplitShape s(i.head_dim, i.heads, i.k, i.v);
    if (s.v_lookup != cuda::decode::VLookup::lane || s.v_copies == cuda::decode::kBanks) continue;
    SCOPED_TRACE(describe(i));
    ++halved;
    EXPECT_EQ(s.v_copies, cuda::decode::kBanks / 2);
    const int blocks = blocks_per_sm_by_shared(s.shared_bytes);
    EXPECT_LT(blocks_per_sm_by_shared(s.shared_bytes + kExtraCopiesBytes), blocks);
    if (s.tile == 32 && s.stages == 3) {
      EXPECT_LT(blocks_per_sm_by_shared(s.shared_bytes + kExtraCopiesBytes - s.stage_bytes - 16),
                blocks);
    }
  }
  EXPECT_GT(halved, 0) << "no instance takes the half table";
}

// Shared-memory wavefronts of one warp-wide load of `bytes` per lane at byte addresses
// `address[lane]`: the warp is served in phases of 128 / bytes lanes (16 lanes for 8-byte
// loads, 8 for 16-byte ones), and a phase takes as many wavefronts as the most distinct 4-byte
// words any one of the 32 banks holds (lanes reading the same word share it).
int wavefronts(const std::vector<int>& address, int bytes) {
  const int lanes_per_phase = 128 / bytes;
  int total = 0;
  for (int first = 0; first < 32; first += lanes_per_phase) {
    std::map<int, std::set<int>> words_of_bank;
    for (int lane = first; lane < first + lanes_per_phase; ++lane) {
      for (int b = 0; b < bytes; b += 4) {
        const int word = (address[lane] + b) / 4;
        words_of_bank[word % 32].insert(word);
      }
    }
    int most = 0;
    for (const auto& [bank, words] : words_of_bank) {
      most = std::max(most, static_cast<int>(words.size()));
    }
    total += most;
  }
  return total;
}

// The tensor-core V pass (values.cuh, MmaValues): lane (g = lane / 4, p = lane % 4) of warp w
// reads, for its k-step, the R = D / 32 bytes of codes (8 at D 256, 16 at D 512) at column
// w · D / 4 + R · g of rows 16k + 2p + {0, 1, 8, 9}. At a pitch that is a multiple of 128 bytes
// the four rows of a phase fall on the same banks (at D 256 Nsight Compute measured 8
// wavefronts per load, as this model predicts); the padded pitch must give the ideal R / 4.
// Only that pass's instances are padded, and only where it costs no block (D 256, 2 heads,
// K tq4: not padded, keeps its fourth block).
int tensor_core_code_load_wavefronts(const SplitShape& s, int warp, int k, int j) {
  const int run = s.head_dim / 32;
  std::vector<int> address(32);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, p = lane % 4;
    const int row = 16 * k + 2 * p + (j & 1) + 8 * (j >> 1);
    address[lane] = s.stage_v + row * s.v_pitch + warp * (s.head_dim / 4) + g * run;
  }
  return wavefronts(address, run);
}

TEST(SplitLayout, PaddedTensorCoreValueCodeLoadsAreConflictFree) {
  std::set<int> checked_dims;
  for (const Instance& i : every_instance()) {
    const SplitShape s(i.head_dim, i.heads, i.k, i.v);
    if (s.v_pitch == s.v_row_bytes) continue;
    SCOPED_TRACE(describe(i));
    EXPECT_TRUE(s.tensor_core_values) << "V rows padded for a pass that does not need it";
    if (!s.tensor_core_values) continue;
    checked_dims.insert(i.head_dim);
    for (int warp = 0; warp < cuda::decode::kSplitWarps; ++warp) {
      for (int k = 0; k < s.tile / 16; ++k) {
        for (int j = 0; j < 4; ++j) {
          EXPECT_EQ(tensor_core_code_load_wavefronts(s, warp, k, j), i.head_dim / 128)
              << "warp " << warp << " k " << k << " j " << j;
        }
      }
    }
  }
  EXPECT_EQ(checked_dims, (std::set<int>{256, 512})) << "some head dim has no padded instance";
}

// The model itself, on the unpadded pitch: four-way conflicts per phase, 8 wavefronts at D 256
// as Nsight Compute measured on the H200, and 16 at D 512.
TEST(SplitLayout, BankModelReproducesTheMeasuredConflict) {
  for (int d : {256, 512}) {
    SplitShape s(d, 8, RowCodec::f16, RowCodec::tq_byte);
    s.v_pitch = s.v_row_bytes;
    EXPECT_EQ(tensor_core_code_load_wavefronts(s, 0, 0, 0), 4 * d / 128) << "D" << d;
  }
}

}  // namespace
}  // namespace turbodecode
