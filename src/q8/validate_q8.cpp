#include "q8/validate_q8.h"

#include <cstdint>
#include <string>

#include "common/validate.h"
#include "turbodecode/q8.h"

namespace turbodecode::q8 {

MatvecArgs validate_q8_operands(const TensorView& weight, const TensorView& input) {
  check_tensor(input, "input", input.device, DType::f32, {kAnyExtent, kAnyExtent});
  check_backend(input.device);
  check_rows(input, "input", input.device, DType::f32, {kAnyExtent, kAnyExtent});
  const std::int64_t tokens = input.shape[0];
  const std::int64_t cols = input.shape[1];
  check_arg(tokens > 0, "input", "must have at least one row");
  check_arg(
      cols > 0 && cols % kQ8BlockValues == 0, "input",
      "width must be a positive multiple of 32 (whole Q8_0 blocks), is " + std::to_string(cols));
  check_rows(weight, "weight", input.device, DType::u8, {kAnyExtent, q8_row_bytes(cols)});
  check_arg(weight.shape[0] > 0, "weight", "must have at least one row");
  check_arg(reinterpret_cast<std::uintptr_t>(weight.data) % 2 == 0 && weight.strides[0] % 2 == 0,
            "weight", "rows must start on 2-byte boundaries (the f16 block scales)");

  MatvecArgs args;
  args.out_rows = weight.shape[0];
  args.cols = cols;
  args.tokens = tokens;
  args.weight = weight.as<const std::uint8_t>();
  args.row_stride_bytes = weight.strides[0];
  args.input = input.as<const float>();
  args.input_stride = input.strides[0];
  return args;
}

MatvecArgs validate_q8_matvec(const TensorView& weight, const TensorView& input,
                              const TensorView& out) {
  MatvecArgs args = validate_q8_operands(weight, input);
  check_rows(out, "out", input.device, DType::f32, {args.tokens, args.out_rows});
  check_disjoint(out, "out", input, "input");
  check_disjoint(out, "out", weight, "weight");
  args.out = out.as<float>();
  args.out_stride = out.strides[0];
  return args;
}

}  // namespace turbodecode::q8
