// CUDA backend of the TurboQuant-HB codec. Arguments arrive validated by the public calls.
#pragma once

#include "turbodecode/tq_codec.h"

namespace turbodecode::cuda {

void encode_rows(const CodecParams& params, const TensorView& x, const TensorView& codes,
                 const TensorView& norms, Stream stream);
void decode_rows(const CodecParams& params, const TensorView& codes, const TensorView& norms,
                 const TensorView& y, Stream stream);
// out = R_D(in), or R_D⁻¹(in) when `inverse`.
void rotate_rows(int head_dim, bool inverse, const TensorView& in, const TensorView& out,
                 Stream stream);

}  // namespace turbodecode::cuda
