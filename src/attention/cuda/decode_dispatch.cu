// The dispatch switch of the decode kernel, one level per compile-time parameter.
#include "attention/cuda/decode_launch.h"

namespace turbodecode::cuda::decode {
namespace {

template <int D, int C, RowFormat KF>
DecodeKernel select_for_v(RowFormat v) {
  switch (v) {
    case RowFormat::f16:
      return decode_kernel_for<D, C, KF, RowFormat::f16>();
    case RowFormat::fp8:
      return decode_kernel_for<D, C, KF, RowFormat::fp8>();
    case RowFormat::tq3:
      return decode_kernel_for<D, C, KF, RowFormat::tq3>();
    case RowFormat::tq4:
      return decode_kernel_for<D, C, KF, RowFormat::tq4>();
    case RowFormat::tq5:
      return decode_kernel_for<D, C, KF, RowFormat::tq5>();
    case RowFormat::tq6:
      return decode_kernel_for<D, C, KF, RowFormat::tq6>();
    default:
      return decode_kernel_for<D, C, KF, RowFormat::tq8>();
  }
}

template <int D, int C>
DecodeKernel select_for_k(RowFormat k, RowFormat v) {
  switch (k) {
    case RowFormat::f16:
      return select_for_v<D, C, RowFormat::f16>(v);
    case RowFormat::fp8:
      return select_for_v<D, C, RowFormat::fp8>(v);
    case RowFormat::tq4:
      return select_for_v<D, C, RowFormat::tq4>(v);
    default:
      return select_for_v<D, C, RowFormat::tq8>(v);
  }
}

template <int D>
DecodeKernel select_for_columns(int columns, RowFormat k, RowFormat v) {
  return columns == 2 ? select_for_k<D, 2>(k, v) : select_for_k<D, 8>(k, v);
}

}  // namespace

int columns_per_block(int run_columns) { return run_columns <= 2 ? 2 : 8; }

DecodeKernel select_decode_kernel(int head_dim, int columns, RowFormat k, RowFormat v) {
  return head_dim == 256 ? select_for_columns<256>(columns, k, v)
                         : select_for_columns<512>(columns, k, v);
}

}  // namespace turbodecode::cuda::decode
