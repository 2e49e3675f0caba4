// q8_matvec and quantize_q8_0.
#include "api/calls.h"
#include "api/operands.h"
#include "turbodecode/q8.h"

namespace turbodecode::fuzz {

void fuzz_q8_call(FuzzedDataProvider& data) {
  const std::int64_t rows = pick<std::int64_t>(data, 1, 3, {0, -1});
  const std::int64_t cols =
      32 * pick<std::int64_t>(data, 1, 3, {0, -1}) + pick(data, 0, 0, {1, 16});
  const std::int64_t tokens = pick<std::int64_t>(data, 1, 3, {0, -1});
  const std::int64_t row_bytes = q8_row_bytes(sane(cols, 32, 96));
  Operands ops(data);
  if (data.ConsumeBool()) {
    const TensorView src = ops.add(Role::input, DType::f32, {rows, cols});
    const TensorView dst = ops.add(Role::output, DType::u8, {rows, row_bytes});
    if (!ops.too_large()) ops.run([&] { quantize_q8_0(src, dst); });
    return;
  }
  const TensorView weight = ops.add(Role::input, DType::u8, {rows, row_bytes});
  const TensorView input = ops.add(Role::input, DType::f32, {tokens, cols});
  const TensorView out = ops.add(Role::output, DType::f32, {tokens, rows});
  if (!ops.too_large()) ops.run([&] { q8_matvec(weight, input, out); });
}

}  // namespace turbodecode::fuzz
