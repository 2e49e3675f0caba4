// The dispatch switch of the split kernel, one level per compile-time parameter.
#include "attention/cuda/split_launch.h"

namespace turbodecode::cuda::decode {
namespace {

template <int D, int H, RowCodec KC>
SplitKernel select_for_v(RowCodec v) {
  switch (v) {
    case RowCodec::f16:
      return split_kernel_for<D, H, KC, RowCodec::f16>();
    case RowCodec::tq_byte:
      return split_kernel_for<D, H, KC, RowCodec::tq_byte>();
    default:
      return split_kernel_for<D, H, KC, RowCodec::tq_nibble>();
  }
}

template <int D, int H>
SplitKernel select_for_k(RowCodec k, RowCodec v) {
  switch (k) {
    case RowCodec::f16:
      return select_for_v<D, H, RowCodec::f16>(v);
    case RowCodec::tq_byte:
      return select_for_v<D, H, RowCodec::tq_byte>(v);
    default:
      return select_for_v<D, H, RowCodec::tq_nibble>(v);
  }
}

template <int D>
SplitKernel select_for_heads(int heads, RowCodec k, RowCodec v) {
  switch (heads) {
    case 1:
      return select_for_k<D, 1>(k, v);
    case 2:
      return select_for_k<D, 2>(k, v);
    case 4:
      return select_for_k<D, 4>(k, v);
    default:
      return select_for_k<D, 8>(k, v);
  }
}

}  // namespace

SplitKernel select_split_kernel(int head_dim, int heads, RowCodec k, RowCodec v) {
  return head_dim == 256 ? select_for_heads<256>(heads, k, v) : select_for_heads<512>(heads, k, v);
}

}  // namespace turbodecode::cuda::decode
