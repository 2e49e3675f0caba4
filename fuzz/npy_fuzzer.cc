// The .npy parser on arbitrary bytes. It must return a tensor whose bytes match its shape and
// come from the file, or throw InvalidArgument naming the file; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "io/file_bytes.h"
#include "io/parse.h"
#include "turbodecode/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace turbodecode;
  try {
    const HostTensor tensor =
        io::parse_npy({reinterpret_cast<const std::byte*>(data), size}, "f.npy");
    const std::optional<std::int64_t> bytes = io::tensor_bytes(tensor.dtype, tensor.shape);
    if (!bytes || *bytes != static_cast<std::int64_t>(tensor.bytes.size()) ||
        tensor.bytes.size() > size) {
      __builtin_trap();
    }
  } catch (const InvalidArgument& error) {
    if (error.argument() != "f.npy") __builtin_trap();
  }
  return 0;
}
