// Validation of Q8_0 matvec operands (SPEC §7), shared by q8_matvec and the HC fusions.
#pragma once

#include <cstdint>

#include "q8/q8_args.h"
#include "turbodecode/tensor.h"

namespace turbodecode::q8 {

// Checks weight u8 [rows, q8_row_bytes(cols)] (2-byte aligned rows) and input [T, cols] f32 on
// one device, and returns the matvec arguments without the output.
MatvecArgs validate_q8_operands(const TensorView& weight, const TensorView& input);

// The whole q8_matvec call: operands plus out [T, rows] f32, disjoint from both.
MatvecArgs validate_q8_matvec(const TensorView& weight, const TensorView& input,
                              const TensorView& out);

// Runs the matvec on the CPU.
void matvec_cpu(const MatvecArgs& args);

}  // namespace turbodecode::q8
