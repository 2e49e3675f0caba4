// The .safetensors parser on arbitrary bytes. It must return tensors whose bytes match their
// shapes and together fill the file's data section, or throw InvalidArgument naming the file;
// anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "io/file_bytes.h"
#include "io/parse.h"
#include "turbodecode/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace turbodecode;
  try {
    const NamedTensors tensors =
        io::parse_safetensors({reinterpret_cast<const std::byte*>(data), size}, "f.safetensors");
    std::size_t total = 0;
    for (const auto& [name, tensor] : tensors) {
      const std::optional<std::int64_t> bytes = io::tensor_bytes(tensor.dtype, tensor.shape);
      if (!bytes || *bytes != static_cast<std::int64_t>(tensor.bytes.size())) __builtin_trap();
      total += tensor.bytes.size();
    }
    if (total > size) __builtin_trap();
  } catch (const InvalidArgument& error) {
    if (error.argument() != "f.safetensors") __builtin_trap();
  }
  return 0;
}
