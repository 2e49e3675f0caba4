// The public API's validation against the CPU backend: append_kv, plan_decode/run_decode, the
// row codec, the HC operators and the Q8_0 matvec, called with shapes, strides, dtypes, indices
// and options the fuzzer picks or breaks. The contract (fuzz/api/operands.h): success writes
// only the outputs' elements; a rejection is a turbodecode::Error and writes nothing. Anything
// else (another exception, a crash, a sanitizer report, a hang) is a finding.
#include <cstdlib>

#include "api/calls.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // One worker thread: runs are reproducible and cheap to start.
  setenv("TURBODECODE_THREADS", "1", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace turbodecode::fuzz;
  FuzzedDataProvider data(bytes, size);
  switch (data.ConsumeIntegralInRange(0, 4)) {
    case 0:
      fuzz_codec_call(data);
      break;
    case 1:
      fuzz_cache_call(data);
      break;
    case 2:
      fuzz_decode_call(data);
      break;
    case 3:
      fuzz_hc_call(data);
      break;
    default:
      fuzz_q8_call(data);
  }
  return 0;
}
