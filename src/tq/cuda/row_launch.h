// Host-side launch facts shared by the codec and append kernels: how a row is stored, whether a
// tensor's rows may be read and written with 16-byte vectors (kernels take the vector path only
// when every tensor they touch allows it, byte accesses otherwise), byte strides, and grid sizes.
#pragma once

#include <cstdint>

#include "common/cuda_runtime.h"
#include "turbodecode/tensor.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::cuda {

// How a row is stored, as the row kernels see it: F16 values, FP8 codes and a scale, or TQ codes
// of `bits` bits and norms.
enum class RowKind : int { f16, fp8, tq };
struct RowEncoding {
  RowKind kind;
  int bits;
};

inline RowEncoding row_encoding(RowFormat format) {
  if (format == RowFormat::f16) return {RowKind::f16, 16};
  if (format == RowFormat::fp8) return {RowKind::fp8, 8};
  return {RowKind::tq, format_bits(format)};
}

inline constexpr std::int64_t kVectorBytes = 16;

// True when the data pointer and every outer stride are multiples of 16 bytes, so that each
// lane's slice of a row (a multiple of its own width, at most 16 bytes) is naturally aligned.
// An absent view imposes nothing.
inline bool allows_vector_access(const TensorView& t) {
  if (!t.present()) return true;
  if (reinterpret_cast<std::uintptr_t>(t.data) % kVectorBytes != 0) return false;
  const auto element = static_cast<std::int64_t>(dtype_bytes(t.dtype));
  for (int d = 0; d + 1 < t.rank; ++d) {
    if (t.strides[d] * element % kVectorBytes != 0) return false;
  }
  return true;
}

inline std::int64_t stride_bytes(const TensorView& t, int dim) {
  return t.strides[dim] * static_cast<std::int64_t>(dtype_bytes(t.dtype));
}

// Blocks of a grid-stride launch over `items` work items, `items_per_block` at a time: at most
// kBlocksPerSm per multiprocessor, so that a block's setup (staging a code table in shared
// memory) is shared by several items once the work is large.
inline constexpr std::int64_t kBlocksPerSm = 16;

inline unsigned grid_blocks(std::int64_t items, int items_per_block) {
  const std::int64_t cap = kBlocksPerSm * sm_count();
  const std::int64_t blocks = (items + items_per_block - 1) / items_per_block;
  return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

}  // namespace turbodecode::cuda
