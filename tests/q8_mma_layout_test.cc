// The indices of the tensor-core Q8_0 matvec (src/q8/q8_mma_layout.h) on the CPU: one warp's
// staged weight rows and inputs, its fragments and its m16n8k8 products emulated lane by lane,
// with the PTX ISA's fragment layout written out here independently, against plain dot
// products; and the shared-memory bank patterns the layout promises.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "common/f16.h"
#include "hc_problem.h"
#include "q8/q8_mma_layout.h"
#include "test_support.h"

namespace turbodecode {
namespace {

namespace layout = q8::mma;

constexpr int kRows = 16;   // one m16 tile
constexpr int kTokens = 8;  // one n8 tile
constexpr int kLanes = 32;

// One warp's tile, staged the way the kernel stages a pipeline stage.
struct StagedTile {
  int blocks = 0;
  int lead[kRows] = {};
  std::vector<std::uint8_t> weights;  // kRows row buffers of kRowStride bytes
  std::vector<float> inputs;          // kTokens rows of kInputStride floats
};

// Copies each row's span (blocks·34 bytes, placed at lead mod 16 in a fake global buffer full
// of other bytes) chunk by chunk as the kernel's cp.async calls do: chunk_bytes(...) bytes,
// the rest of the chunk zero-filled, chunks with nothing left not copied at all.
StagedTile stage(const std::vector<std::uint8_t>& packed, const std::vector<float>& x, int blocks,
                 const int (&lead)[kRows]) {
  const int row_bytes = layout::kStageBlocks * kQ8BlockBytes;
  StagedTile tile;
  tile.blocks = blocks;
  tile.weights.assign(kRows * layout::kRowStride, 0xEE);
  tile.inputs.assign(kTokens * layout::kInputStride, -1e30f);
  for (int r = 0; r < kRows; ++r) {
    tile.lead[r] = lead[r];
    std::vector<std::uint8_t> global(16 * 16, 0xCD);
    const int start = 32 + lead[r];  // 16-byte aligned allocation, row span at lead mod 16
    std::memcpy(global.data() + start, packed.data() + r * row_bytes, blocks * kQ8BlockBytes);
    for (int c = 0; c < layout::kRowChunks; ++c) {
      const int bytes = layout::chunk_bytes(lead[r], blocks, c);
      if (bytes <= 0) continue;
      std::uint8_t* dst = tile.weights.data() + r * layout::kRowStride + 16 * c;
      std::memset(dst, 0, 16);
      std::memcpy(dst, global.data() + start - lead[r] + 16 * c, bytes);
    }
  }
  for (int n = 0; n < kTokens; ++n) {
    for (int col = 0; col < blocks * kQ8BlockValues; ++col) {
      tile.inputs[n * layout::kInputStride + col] = x[n * layout::kStageCols + col];
    }
  }
  return tile;
}

// The PTX ISA's mma.m16n8k8 (.tf32): lane 4g + t holds A a0 = (g, t), a1 = (g + 8, t),
// a2 = (g, t + 4), a3 = (g + 8, t + 4); B b0 = (t, g), b1 = (t + 4, g); C c0 = (g, 2t),
// c1 = (g, 2t + 1), c2 = (g + 8, 2t), c3 = (g + 8, 2t + 1). Adds A·B to every lane's c.
void emulate_mma(const double (&a)[kLanes][4], const double (&b)[kLanes][2],
                 double (&c)[kLanes][4]) {
  double am[16][8] = {}, bm[8][8] = {};
  for (int lane = 0; lane < kLanes; ++lane) {
    const int g = lane / 4, t = lane % 4;
    am[g][t] = a[lane][0];
    am[g + 8][t] = a[lane][1];
    am[g][t + 4] = a[lane][2];
    am[g + 8][t + 4] = a[lane][3];
    bm[t][g] = b[lane][0];
    bm[t + 4][g] = b[lane][1];
  }
  double d[16][8] = {};
  for (int i = 0; i < 16; ++i) {
    for (int n = 0; n < 8; ++n) {
      for (int k = 0; k < 8; ++k) d[i][n] += am[i][k] * bm[k][n];
    }
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    const int g = lane / 4, t = lane % 4;
    c[lane][0] += d[g][2 * t];
    c[lane][1] += d[g][2 * t + 1];
    c[lane][2] += d[g + 8][2 * t];
    c[lane][3] += d[g + 8][2 * t + 1];
  }
}

// What the kernel's lanes compute from a staged tile, with its indices: out[token][row].
std::vector<double> run_warp(const StagedTile& tile) {
  double acc[kLanes][4] = {};
  for (int j = 0; j < tile.blocks; ++j) {
    double block[kLanes][4] = {};
    for (int s = 0; s < layout::kKSteps; ++s) {
      double a[kLanes][4], b[kLanes][2];
      for (int lane = 0; lane < kLanes; ++lane) {
        const int g = layout::group_of(lane), t = layout::thread_in_group(lane);
        std::uint8_t pairs[2][2];
        for (int h = 0; h < 2; ++h) {
          const int r = g + 8 * h;
          const std::uint8_t* p = tile.weights.data() + r * layout::kRowStride +
                                  layout::weight_pair_offset(tile.lead[r], j, s, t);
          pairs[h][0] = p[0];
          pairs[h][1] = p[1];
        }
        for (int i = 0; i < 4; ++i) {
          a[lane][i] =
              static_cast<std::int8_t>(pairs[layout::a_row_half(i)][layout::a_pair_byte(i)]);
        }
        for (int i = 0; i < 2; ++i) {
          b[lane][i] = tile.inputs[g * layout::kInputStride + layout::input_offset(j, s, t) + i];
        }
      }
      emulate_mma(a, b, block);
    }
    for (int lane = 0; lane < kLanes; ++lane) {
      const int g = layout::group_of(lane);
      for (int i = 0; i < 4; ++i) {
        const int r = layout::acc_row(i, g);
        std::uint16_t bits;
        std::memcpy(
            &bits,
            tile.weights.data() + r * layout::kRowStride + layout::scale_offset(tile.lead[r], j),
            2);
        acc[lane][i] += f16_to_f32(bits) * block[lane][i];
      }
    }
  }
  std::vector<double> out(kTokens * kRows, -1e300);
  std::set<int> written;
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const int row = layout::acc_row(i, layout::group_of(lane));
      const int token = layout::acc_token(i, layout::thread_in_group(lane));
      EXPECT_TRUE(written.insert(token * kRows + row).second) << "written twice";
      out[token * kRows + row] = acc[lane][i];
    }
  }
  EXPECT_EQ(written.size(), static_cast<std::size_t>(kTokens * kRows));
  return out;
}

TEST(Q8MmaLayout, OneWarpTileEqualsDotProducts) {
  for (int round = 0; round < 8; ++round) {
    const std::uint64_t seed = testing::fresh_seed();
    for (int blocks = 1; blocks <= layout::kStageBlocks; ++blocks) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", blocks " + std::to_string(blocks));
      const auto packed = testing::random_q8_weight(kRows, layout::kStageCols, seed);
      const auto x = testing::gaussian(kTokens * layout::kStageCols, seed + 1);
      int lead[kRows];
      for (int r = 0; r < kRows; ++r) lead[r] = 2 * ((r * 3 + round) % 8);  // every lead
      const auto got = run_warp(stage(packed, x, blocks, lead));
      const int row_bytes = layout::kStageBlocks * kQ8BlockBytes;
      for (int n = 0; n < kTokens; ++n) {
        for (int r = 0; r < kRows; ++r) {
          double want = 0.0;
          for (int j = 0; j < blocks; ++j) {
            const std::uint8_t* block = packed.data() + r * row_bytes + j * kQ8BlockBytes;
            std::uint16_t bits;
            std::memcpy(&bits, block, 2);
            double dot = 0.0;
            for (int c = 0; c < kQ8BlockValues; ++c) {
              dot += static_cast<std::int8_t>(block[2 + c]) *
                     static_cast<double>(x[n * layout::kStageCols + j * kQ8BlockValues + c]);
            }
            want += f16_to_f32(bits) * dot;
          }
          EXPECT_NEAR(got[n * kRows + r], want, 1e-9 * (1.0 + std::abs(want)))
              << "token " << n << ", row " << r;
        }
      }
    }
  }
}

TEST(Q8MmaLayout, KOrderCoversEachColumnOnce) {
  for (int s = 0; s < layout::kKSteps; ++s) {
    std::set<int> columns;
    for (int k = 0; k < 8; ++k) columns.insert(layout::column_of_k(s, k));
    EXPECT_EQ(columns.size(), 8u);
    EXPECT_EQ(*columns.begin(), 8 * s);
    EXPECT_EQ(*columns.rbegin(), 8 * s + 7);
  }
}

// Banks (4-byte words mod 32) of one warp load; a word read by several lanes is one access.
bool conflict_free(const std::vector<std::pair<int, int>>& lane_words) {
  std::set<int> words, banks;
  for (const auto& [lane, word] : lane_words) words.insert(word);
  for (int word : words) {
    if (!banks.insert(word % 32).second) return false;
  }
  return true;
}

TEST(Q8MmaLayout, StagedLoadsAreBankConflictFree) {
  for (int j = 0; j < layout::kStageBlocks; ++j) {
    for (int s = 0; s < layout::kKSteps; ++s) {
      // Weight pairs of rows g (and separately g + 8), all rows with the same lead.
      for (int lead = 0; lead < 16; lead += 2) {
        for (int h = 0; h < 2; ++h) {
          std::vector<std::pair<int, int>> words;
          for (int lane = 0; lane < kLanes; ++lane) {
            const int r = layout::group_of(lane) + 8 * h;
            const int byte = r * layout::kRowStride +
                             layout::weight_pair_offset(lead, j, s, layout::thread_in_group(lane));
            words.emplace_back(lane, byte / 4);
          }
          EXPECT_TRUE(conflict_free(words)) << "weights: lead " << lead << ", s " << s;
        }
      }
      // Input float2 loads, served per half-warp.
      for (int half = 0; half < 2; ++half) {
        std::vector<std::pair<int, int>> words;
        for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
          const int word = layout::group_of(lane) * layout::kInputStride +
                           layout::input_offset(j, s, layout::thread_in_group(lane));
          words.emplace_back(lane, word);
          words.emplace_back(lane, word + 1);
        }
        EXPECT_TRUE(conflict_free(words)) << "inputs: s " << s;
      }
    }
  }
}

}  // namespace
}  // namespace turbodecode
