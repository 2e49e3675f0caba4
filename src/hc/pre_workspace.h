// Layout of the HC-pre / norm-mix CUDA workspace (see HcPrePlan in hc.h). Each row of n·E
// values is cut into chunks of kPreChunkWidth, each chunk into two halves. A thread block
// computes, for a group of rows, one half or one whole chunk: per row the M partial dot
// products and the partial sum of squares, stored in the workspace. The last block of a group
// to arrive (counted in counters[group]) combines them. Rows are grouped by at least
// kPreGroupRows and at most kPreMaxGroupRows; one counter is kept per kPreGroupRows rows.
#pragma once

#include <cstdint>

namespace turbodecode::hc {

inline constexpr int kPreChunkWidth = 256;
inline constexpr int kPreGroupRows = 4;     // the smallest row group: one counter per 4 rows
inline constexpr int kPreMaxGroupRows = 8;  // the largest: one tensor-core tile of rows

inline std::int64_t pre_chunks(std::int64_t row_width) {
  return (row_width + kPreChunkWidth - 1) / kPreChunkWidth;
}
inline std::int64_t pre_groups(std::int64_t rows) {
  return (rows + kPreGroupRows - 1) / kPreGroupRows;
}
// Partials: float [rows][chunks][2][mix_width + 1] (the last entry the sum of squares; slot 1
// used only when the two halves of a chunk ran in different blocks), then one u32 counter per
// kPreGroupRows rows, 256-byte aligned.
inline std::int64_t pre_partials_bytes(std::int64_t rows, std::int64_t chunks, int mix_width) {
  const std::int64_t bytes = rows * chunks * 2 * (mix_width + 1) * 4;
  return (bytes + 255) / 256 * 256;
}
inline std::int64_t pre_workspace_bytes(std::int64_t rows, std::int64_t chunks, int mix_width) {
  return pre_partials_bytes(rows, chunks, mix_width) + pre_groups(rows) * 4;
}

}  // namespace turbodecode::hc
