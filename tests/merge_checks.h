// merge_attention against the double-precision oracle, shared by the CPU and CUDA tests: fresh
// random parts (seed in the trace), some of them empty (lse −inf, out NaN, which must never
// leak), optionally padded rows, outputs poisoned before every run, and the run repeated to
// check it is bitwise deterministic.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference/merge_oracle.h"
#include "test_support.h"
#include "turbodecode/buffer.h"
#include "turbodecode/sharded_decode.h"

namespace turbodecode::testing {

constexpr double kMergeTolerance = 1e-5;

struct MergeShape {
  std::int64_t parts;
  std::int64_t rows;
  std::int64_t heads;
  std::int64_t dim;
  std::int64_t padding;  // extra floats after every row of D in parts_out and out
};

struct MergeOutputs {
  std::vector<float> out;  // [rows·heads, D], padding dropped
  std::vector<float> lse;  // [rows·heads]
};

// parts_out and parts_lse on the host, contiguous [R, rows·heads, D] and [R, rows·heads]; a
// quarter of the parts are empty, and so is every part of (row 0, head 0).
struct MergeInputs {
  std::vector<float> parts_out;
  std::vector<float> parts_lse;
};

inline MergeInputs random_merge_inputs(const MergeShape& s, std::uint64_t seed) {
  const auto items = static_cast<std::size_t>(s.parts * s.rows * s.heads);
  MergeInputs in{gaussian(items * static_cast<std::size_t>(s.dim), seed),
                 gaussian(items, seed + 1, 4.0f)};
  std::mt19937_64 rng(seed + 2);
  const std::int64_t per_part = s.rows * s.heads;
  for (std::size_t i = 0; i < items; ++i) {
    if (rng() % 4 != 0 && static_cast<std::int64_t>(i) % per_part != 0) continue;
    in.parts_lse[i] = -INFINITY;
    for (std::int64_t d = 0; d < s.dim; ++d) {
      in.parts_out[i * static_cast<std::size_t>(s.dim) + static_cast<std::size_t>(d)] =
          std::numeric_limits<float>::quiet_NaN();
    }
  }
  return in;
}

// Copies contiguous rows of `dim` floats into rows of dim + padding floats (padding NaN).
inline std::vector<float> pad_rows(const std::vector<float>& rows, std::int64_t dim,
                                   std::int64_t padding) {
  const std::size_t count = rows.size() / static_cast<std::size_t>(dim);
  const auto stride = static_cast<std::size_t>(dim + padding);
  std::vector<float> padded(count * stride, std::numeric_limits<float>::quiet_NaN());
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(&padded[i * stride], &rows[i * static_cast<std::size_t>(dim)],
                static_cast<std::size_t>(dim) * sizeof(float));
  }
  return padded;
}

// Runs merge_attention on `device` with poisoned outputs; returns them on the host.
inline MergeOutputs run_merge(Device device, const MergeShape& s, const MergeInputs& in) {
  const std::int64_t row_floats = s.dim + s.padding;
  const Buffer parts_out = to_device(device, pad_rows(in.parts_out, s.dim, s.padding));
  const Buffer parts_lse = to_device(device, in.parts_lse);
  Buffer out(device, s.rows * s.heads * row_floats * std::int64_t{sizeof(float)});
  Buffer lse(device, s.rows * s.heads * std::int64_t{sizeof(float)});
  out.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  merge_attention(
      parts_out.view(DType::f32, {s.parts, s.rows, s.heads, row_floats}).slice(3, 0, s.dim),
      parts_lse.view(DType::f32, {s.parts, s.rows, s.heads}),
      out.view(DType::f32, {s.rows, s.heads, row_floats}).slice(2, 0, s.dim),
      lse.view(DType::f32, {s.rows, s.heads}));
  synchronize();
  const std::vector<float> padded = to_host<float>(out);
  MergeOutputs result{{}, to_host<float>(lse)};
  for (std::int64_t i = 0; i < s.rows * s.heads; ++i) {
    const auto begin = padded.begin() + i * row_floats;
    result.out.insert(result.out.end(), begin, begin + s.dim);
  }
  return result;
}

inline void check_merge(Device device, const MergeShape& s) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + ", R " + std::to_string(s.parts) + ", n " +
               std::to_string(s.rows) + ", heads " + std::to_string(s.heads) + ", D " +
               std::to_string(s.dim) + ", padding " + std::to_string(s.padding));
  const MergeInputs in = random_merge_inputs(s, seed);
  const MergeOutputs got = run_merge(device, s, in);
  const oracle::MergeResult want =
      oracle::merge_attention(in.parts_out, in.parts_lse, s.parts, s.rows * s.heads, s.dim);
  EXPECT_LE(relative_l2(got.out, want.out), kMergeTolerance);
  for (std::size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      ASSERT_EQ(got.lse[i], -INFINITY) << "row·head " << i;
      for (std::int64_t d = 0; d < s.dim; ++d) {
        ASSERT_EQ(got.out[i * static_cast<std::size_t>(s.dim) + static_cast<std::size_t>(d)], 0.0f)
            << "row·head " << i << " saw nothing";
      }
    } else {
      ASSERT_NEAR(got.lse[i], want.lse[i], kMergeTolerance * (1.0 + std::abs(want.lse[i])))
          << "row·head " << i;
    }
  }
  const MergeOutputs again = run_merge(device, s, in);
  EXPECT_EQ(std::memcmp(got.out.data(), again.out.data(), got.out.size() * sizeof(float)), 0)
      << "out differs between runs";
  EXPECT_EQ(std::memcmp(got.lse.data(), again.lse.data(), got.lse.size() * sizeof(float)), 0)
      << "lse differs between runs";
}

constexpr MergeShape kMergeShapes[] = {{1, 3, 2, 256, 0}, {2, 4, 8, 512, 0}, {3, 5, 3, 256, 4},
                                       {5, 2, 4, 512, 0}, {5, 7, 1, 33, 3},  {2, 1, 1, 1, 0}};

}  // namespace turbodecode::testing
