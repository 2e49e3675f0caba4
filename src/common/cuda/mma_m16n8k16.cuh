// D = A·B + C for one 16 × 8 × 16 tile with 16-bit float operands (mma.sync m16n8k16, f32
// accumulators), shared by the decode-attention scores (F16 K against q) and its tensor-core
// V pass (bf16 codebook values against the weights). Fragments (PTX ISA; g = lane / 4,
// i = lane % 4), two 16-bit values per register, the lower column (or row of B) in the lower
// half: a = A(g, 2i..), A(g + 8, 2i..), A(g, 2i + 8..), A(g + 8, 2i + 8..); b = B(2i.., g),
// B(2i + 8.., g); d = D(g, 2i), D(g, 2i + 1), D(g + 8, 2i), D(g + 8, 2i + 1).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace turbodecode::cuda {

#define TD_MMA_M16N8K16(TYPE)                                \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE \
      ".f32 {%0, %1, %2, %3}, "                              \
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"      \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])       \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))

// Half is __half or __nv_bfloat16: the type of both operands.
template <class Half>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                                             const unsigned (&b)[2]) {
  static_assert(std::is_same_v<Half, __half> || std::is_same_v<Half, __nv_bfloat16>,
                "f16 or bf16 operands");
  if constexpr (std::is_same_v<Half, __half>) {
    TD_MMA_M16N8K16("f16");
  } else {
    TD_MMA_M16N8K16("bf16");
  }
}

#undef TD_MMA_M16N8K16

}  // namespace turbodecode::cuda
