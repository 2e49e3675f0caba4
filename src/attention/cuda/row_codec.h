// How a cache row is laid out, as far as the split kernel's memory path cares. Host-safe, so
// that host code and host tests can evaluate the kernel's layout (split_shape.h).
#pragma once

namespace turbodecode::cuda::decode {

// The TQ widths of one byte per code (5, 6, 8 bits) differ only in their codebook, which is
// chosen at run time.
enum class RowCodec : int { f16, tq_byte, tq_nibble };

}  // namespace turbodecode::cuda::decode
