// Public row codec calls (TurboQuant-HB and FP8 rows): one validation function per call, shared by
// both backends, then dispatch on the tensors' device.
#include <cmath>
#include <string>

#include "common/validate.h"
#include "tq/codec_cpu.h"
#include "turbodecode/tq_codec.h"

#ifdef TURBODECODE_WITH_CUDA
#include "tq/cuda/codec_cuda.h"
#endif

namespace turbodecode {

namespace {

void check_head_dim(int head_dim) {
  check_arg(head_dim == 256 || head_dim == 512, "head_dim",
            "must be 256 or 512, not " + std::to_string(head_dim));
}

void check_params(const CodecParams& params) {
  check_head_dim(params.head_dim);
  check_arg(is_quantized(params.format) && format_bits(params.format) != 0, "format",
            "must be a quantized format (fp8, tq3, tq4, tq5, tq6, tq8)");
  check_arg(std::isfinite(params.scale_factor_d512) && params.scale_factor_d512 > 0.0f,
            "scale_factor_d512", "must be finite and positive");
}

void check_input_rows(const TensorView& x, std::string_view name, int head_dim) {
  check_arg(x.present(), name, "must not be null");
  check_arg(x.dtype == DType::f32 || x.dtype == DType::f16 || x.dtype == DType::bf16, name,
            std::string("must be f32, f16 or bf16, not ") + dtype_name(x.dtype));
  check_rows(x, name, x.device, x.dtype, {kAnyExtent, head_dim});
  check_backend(x.device);
}

// An output may be the very same view as the input (in place) but must not partially overlap.
void check_in_place_or_disjoint(const TensorView& in, std::string_view in_name,
                                const TensorView& out, std::string_view out_name) {
  const bool same_view = in.data == out.data && in.strides == out.strides;
  if (!same_view) check_disjoint(out, out_name, in, in_name);
}

void validate_encode(const CodecParams& params, const TensorView& x, const TensorView& codes,
                     const TensorView& norms) {
  check_params(params);
  check_input_rows(x, "x", params.head_dim);
  const std::int64_t rows = x.shape[0];
  check_rows(codes, "codes", x.device, DType::u8,
             {rows, row_bytes(params.format, params.head_dim)});
  check_rows(norms, "norms", x.device, DType::f32,
             {rows, row_scales(params.format, params.head_dim)});
  check_disjoint(codes, "codes", x, "x");
  check_disjoint(norms, "norms", x, "x");
  check_disjoint(norms, "norms", codes, "codes");
}

void validate_decode(const CodecParams& params, const TensorView& codes, const TensorView& norms,
                     const TensorView& y) {
  check_params(params);
  check_arg(codes.present(), "codes", "must not be null");
  check_backend(codes.device);
  check_rows(codes, "codes", codes.device, DType::u8,
             {kAnyExtent, row_bytes(params.format, params.head_dim)});
  const std::int64_t rows = codes.shape[0];
  check_rows(norms, "norms", codes.device, DType::f32,
             {rows, row_scales(params.format, params.head_dim)});
  check_rows(y, "y", codes.device, DType::f32, {rows, params.head_dim});
  check_disjoint(y, "y", codes, "codes");
  check_disjoint(y, "y", norms, "norms");
}

void validate_rotate(int head_dim, const TensorView& in, std::string_view in_name,
                     const TensorView& out, std::string_view out_name) {
  check_head_dim(head_dim);
  check_arg(in.present(), in_name, "must not be null");
  check_backend(in.device);
  check_rows(in, in_name, in.device, DType::f32, {kAnyExtent, head_dim});
  check_rows(out, out_name, in.device, DType::f32, {in.shape[0], head_dim});
  check_in_place_or_disjoint(in, in_name, out, out_name);
}

void rotate_dispatch(int head_dim, bool inverse, const TensorView& in, const TensorView& out,
                     Stream stream) {
  if (in.shape[0] == 0) return;
#ifdef TURBODECODE_WITH_CUDA
  if (in.device == Device::cuda) return cuda::rotate_rows(head_dim, inverse, in, out, stream);
#endif
  tq::rotate_rows_cpu(head_dim, inverse, in, out);
}

}  // namespace

void encode_rows(const CodecParams& params, const TensorView& x, const TensorView& codes,
                 const TensorView& norms, Stream stream) {
  validate_encode(params, x, codes, norms);
  if (x.shape[0] == 0) return;
#ifdef TURBODECODE_WITH_CUDA
  if (x.device == Device::cuda) return cuda::encode_rows(params, x, codes, norms, stream);
#endif
  tq::encode_rows_cpu(params, x, codes, norms);
}

void decode_rows(const CodecParams& params, const TensorView& codes, const TensorView& norms,
                 const TensorView& y, Stream stream) {
  validate_decode(params, codes, norms, y);
  if (codes.shape[0] == 0) return;
#ifdef TURBODECODE_WITH_CUDA
  if (codes.device == Device::cuda) return cuda::decode_rows(params, codes, norms, y, stream);
#endif
  tq::decode_rows_cpu(params, codes, norms, y);
}

void rotate_rows(int head_dim, const TensorView& x, const TensorView& y, Stream stream) {
  validate_rotate(head_dim, x, "x", y, "y");
  rotate_dispatch(head_dim, false, x, y, stream);
}

void unrotate_rows(int head_dim, const TensorView& y, const TensorView& x, Stream stream) {
  validate_rotate(head_dim, y, "y", x, "x");
  rotate_dispatch(head_dim, true, y, x, stream);
}

}  // namespace turbodecode
