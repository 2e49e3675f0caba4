// f32 products on the tensor cores with TF32 operands (mma.sync m16n8k8), shared by the HC
// norm-mix and the tensor-core Q8_0 matvec: an f32 operand x is split as x = hi + lo, both
// TF32, and multiplied twice, which keeps ≈ 22 bits of x with the f32 range (F16 would
// overflow on large activations).
#pragma once

namespace turbodecode::cuda {

// d += A·B for one 16 × 8 × 8 TF32 tile, f32 accumulators. Fragments (PTX ISA, mma m16n8k8
// .tf32; g = lane / 4, t = lane % 4): a = A(g, t), A(g + 8, t), A(g, t + 4), A(g + 8, t + 4);
// b = B(t, g), B(t + 4, g); d = D(g, 2t), D(g, 2t + 1), D(g + 8, 2t), D(g + 8, 2t + 1).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x = hi + lo as TF32 bit patterns: hi is x with its low 13 mantissa bits cleared (exact in
// TF32, never rounded up to infinity), so x − hi is exact; lo is that rounded to TF32, to
// nearest with ties away from zero, by adding half a TF32 ulp to its bits before clearing the
// low 13 (two integer operations, cheaper than cvt.rna.tf32.f32: docs/hc.md, "Tried, not
// kept"). For ±inf, x − hi is NaN and lo
// comes out as −0 (the carry reaches the sign bit), so hi alone carries the infinity; NaN
// stays NaN in hi. Neither case is covered by tests.
__device__ __forceinline__ void split_tf32(float x, unsigned& hi, unsigned& lo) {
  constexpr unsigned kTf32Bits = 0xffffe000u;
  hi = __float_as_uint(x) & kTf32Bits;
  lo = (__float_as_uint(__fsub_rn(x, __uint_as_float(hi))) + 0x1000u) & kTf32Bits;
}

// x = hi + mid + lo exactly, all three TF32 bit patterns: hi and mid as split_tf32 gives them
// (mid = x − hi, at most 13 significant bits, rounded to TF32), lo what is then left (exact: at
// most 2 significant bits). Against an operand that is exact in TF32 (F16 weights) the three
// products are exact, so only the f32 accumulation rounds: with hi + lo alone the ≈ 2⁻²¹
// relative error of each product was enough for the HC-pre collapse, whose pre weights amplify
// the mix error through the sigmoid, to miss the 1e-5 tolerance for one random problem in 25.
__device__ __forceinline__ void split_tf32_exact(float x, unsigned& hi, unsigned& mid,
                                                 unsigned& lo) {
  split_tf32(x, hi, mid);
  lo = __float_as_uint(__fsub_rn(__fsub_rn(x, __uint_as_float(hi)), __uint_as_float(mid)));
}

}  // namespace turbodecode::cuda
