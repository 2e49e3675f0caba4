// The argument checks every Communicator shares, made once before its gather runs.
#include <cstdint>

#include "common/validate.h"
#include "turbodecode/sharded_decode.h"

namespace turbodecode {

void Communicator::all_gather(const TensorView& send, const TensorView& recv, Stream stream) {
  const std::int64_t count = send.shape[0];
  check_tensor(send, "send", device(), DType::f32, {count});
  check_arg(count >= 1, "send", "must hold at least one float");
  check_arg(send.is_contiguous(), "send", "must be contiguous");
  check_tensor(recv, "recv", device(), DType::f32, {ranks(), count});
  check_arg(recv.is_contiguous(), "recv", "must be contiguous");
  check_disjoint(recv, "recv", send, "send");
  gather(send.as<const float>(), recv.as<float>(), count, stream);
}

}  // namespace turbodecode
