// Layout of the HC-pre / norm-mix CUDA workspace (see HcPrePlan in hc.h). Rows are processed
// in groups of kPreGroupRows; each row of n·E values is cut into chunks of kPreChunkWidth, one
// thread block per (chunk, group). A block stores, per row of its group, M partial dot products
// and the partial sum of squares; the last block of a group (counted in counters[group])
// combines them.
#pragma once

#include <cstdint>

namespace turbodecode::hc {

inline constexpr int kPreChunkWidth = 256;
inline constexpr int kPreGroupRows = 4;

inline std::int64_t pre_chunks(std::int64_t row_width) {
  return (row_width + kPreChunkWidth - 1) / kPreChunkWidth;
}
inline std::int64_t pre_groups(std::int64_t rows) {
  return (rows + kPreGroupRows - 1) / kPreGroupRows;
}
// Partials: float [rows][chunks][mix_width + 1] (the last entry the sum of squares), then one
// u32 counter per group, 256-byte aligned.
inline std::int64_t pre_partials_bytes(std::int64_t rows, std::int64_t chunks, int mix_width) {
  const std::int64_t bytes = rows * chunks * (mix_width + 1) * 4;
  return (bytes + 255) / 256 * 256;
}
inline std::int64_t pre_workspace_bytes(std::int64_t rows, std::int64_t chunks, int mix_width) {
  return pre_partials_bytes(rows, chunks, mix_width) + pre_groups(rows) * 4;
}

}  // namespace turbodecode::hc
