#include "io/file_bytes.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "common/validate.h"
#include "turbodecode/error.h"

namespace turbodecode::io {

std::optional<std::int64_t> tensor_bytes(DType dtype, const std::vector<std::int64_t>& shape) {
  constexpr std::int64_t kMaxBytes = std::int64_t{1} << 62;
  const auto element_bytes = static_cast<std::int64_t>(dtype_bytes(dtype));
  if (!product_at_most(shape, kMaxBytes / element_bytes)) return std::nullopt;
  // With an extent of 0 the others may be anything: their product may overflow.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t bytes = element_bytes;
  for (std::int64_t extent : shape) bytes *= extent;
  return bytes;
}

void check_file(bool ok, const std::filesystem::path& path, std::string_view rule) {
  if (!ok) throw InvalidArgument(path.string(), std::string(rule));
}

std::vector<std::byte> read_file_bytes(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  check_file(file.good(), path, "cannot open the file for reading");
  const std::streamoff size = file.tellg();
  check_file(size >= 0, path, "cannot determine the file size");
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  file.seekg(0);
  file.read(reinterpret_cast<char*>(bytes.data()), size);
  check_file(file.good() || size == 0, path, "read failed");
  return bytes;
}

void write_file_bytes(const std::filesystem::path& path,
                      std::initializer_list<std::string_view> parts) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  check_file(file.good(), path, "cannot open the file for writing");
  for (std::string_view part : parts) {
    file.write(part.data(), static_cast<std::streamsize>(part.size()));
  }
  file.close();
  check_file(!file.fail(), path, "write failed");
}

}  // namespace turbodecode::io
