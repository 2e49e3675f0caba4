// encode_rows, decode_rows, rotate_rows and unrotate_rows.
#include "api/calls.h"
#include "api/operands.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::fuzz {

void fuzz_codec_call(FuzzedDataProvider& data) {
  CodecParams params;
  const int dim_choice = pick(data, 0, 1, {100, -256, 257, 1 << 30});
  params.head_dim = dim_choice == 0 ? 256 : dim_choice == 1 ? 512 : dim_choice;
  // The quantized formats (fp8 … tq8), now and then f16 or no format at all.
  params.format = static_cast<RowFormat>(pick(data, 1, 6, {0, 7, 200}));
  params.scale_factor_d512 = pick_float(data, {1.0f, 0.5f, 3.0f});
  const int dim = static_cast<int>(sane(params.head_dim, 256, 512));
  const std::int64_t rows = pick<std::int64_t>(data, 0, 3, {-1});
  const std::int64_t row_bytes_of = turbodecode::row_bytes(params.format, dim);
  const int npp = row_scales(params.format, dim);
  Operands ops(data);
  switch (data.ConsumeIntegralInRange(0, 2)) {
    case 0: {
      const auto dtype = static_cast<DType>(data.ConsumeIntegralInRange(0, 2));
      const TensorView x = ops.add(Role::input, dtype, {rows, dim});
      const TensorView codes = ops.add(Role::output, DType::u8, {rows, row_bytes_of});
      const TensorView norms = ops.add(Role::output, DType::f32, {rows, npp});
      if (!ops.too_large()) ops.run([&] { encode_rows(params, x, codes, norms); });
      return;
    }
    case 1: {
      const TensorView codes = ops.add(Role::input, DType::u8, {rows, row_bytes_of});
      const TensorView norms = ops.add(Role::input, DType::f32, {rows, npp});
      const TensorView y = ops.add(Role::output, DType::f32, {rows, dim});
      if (!ops.too_large()) ops.run([&] { decode_rows(params, codes, norms, y); });
      return;
    }
    default: {
      // In place (the same view in and out) is allowed.
      const bool in_place = data.ConsumeBool();
      const TensorView x = ops.add(in_place ? Role::output : Role::input, DType::f32, {rows, dim});
      const TensorView y = in_place ? x : ops.add(Role::output, DType::f32, {rows, dim});
      const bool inverse = data.ConsumeBool();
      if (ops.too_large()) return;
      ops.run([&] {
        if (inverse) {
          unrotate_rows(params.head_dim, x, y);
        } else {
          rotate_rows(params.head_dim, x, y);
        }
      });
    }
  }
}

}  // namespace turbodecode::fuzz
