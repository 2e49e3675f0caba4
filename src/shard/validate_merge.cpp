#include "shard/validate_merge.h"

#include <string>

#include "common/validate.h"

namespace turbodecode::shard {

MergeArgs validate_merge(const TensorView& parts_out, const TensorView& parts_lse,
                         const TensorView& out, const TensorView& lse) {
  // parts_out fixes the device and the sizes every other tensor must match.
  check_arg(parts_out.present(), "parts_out", "must not be null");
  check_arg(parts_out.rank == 4, "parts_out", "must have 4 dimensions [R, n, n_heads, D]");
  const Device device = parts_out.device;
  check_backend(device);
  const auto& shape = parts_out.shape;
  check_arg(shape[0] >= 1 && shape[1] >= 1 && shape[2] >= 1 && shape[3] >= 1, "parts_out",
            "every dimension must be positive, shape is " + shape_string(parts_out));
  check_rows(parts_out, "parts_out", device, DType::f32, {shape[0], shape[1], shape[2], shape[3]});
  check_tensor(parts_lse, "parts_lse", device, DType::f32, {shape[0], shape[1], shape[2]});
  check_rows(out, "out", device, DType::f32, {shape[1], shape[2], shape[3]});
  check_disjoint(out, "out", parts_out, "parts_out");
  check_disjoint(out, "out", parts_lse, "parts_lse");
  if (lse.present()) {
    check_tensor(lse, "lse", device, DType::f32, {shape[1], shape[2]});
    check_disjoint(lse, "lse", parts_out, "parts_out");
    check_disjoint(lse, "lse", parts_lse, "parts_lse");
    check_disjoint(lse, "lse", out, "out");
  }

  MergeArgs args;
  args.parts = shape[0];
  args.rows = shape[1];
  args.heads = shape[2];
  args.dim = shape[3];
  args.parts_out = parts_out.as<const float>();
  args.parts_lse = parts_lse.as<const float>();
  args.out = out.as<float>();
  args.lse = lse.as<float>();
  for (int d = 0; d < 3; ++d) {
    args.parts_out_strides[d] = parts_out.strides[d];
    args.parts_lse_strides[d] = parts_lse.strides[d];
  }
  for (int d = 0; d < 2; ++d) {
    args.out_strides[d] = out.strides[d];
    args.lse_strides[d] = lse.strides[d];
  }
  return args;
}

}  // namespace turbodecode::shard
