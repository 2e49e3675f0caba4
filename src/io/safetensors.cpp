// .safetensors files: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
// packed tensor data (offsets count from the first byte after the header).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "io/file_bytes.h"
#include "io/parse.h"
#include "turbodecode/error.h"
#include "turbodecode/io.h"

namespace turbodecode {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::size_t kLengthBytes = 8;
// The reference implementation refuses larger headers; so do we, before allocating.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

std::optional<DType> dtype_of_name(const std::string& name) {
  if (name == "F32") return DType::f32;
  if (name == "F16") return DType::f16;
  if (name == "BF16") return DType::bf16;
  if (name == "U8") return DType::u8;
  if (name == "I32") return DType::i32;
  return std::nullopt;
}

const char* name_of_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::u8:
      return "U8";
    case DType::i32:
      return "I32";
  }
  return "?";
}

// Where a tensor's bytes lie in the data section.
struct DataSpan {
  std::uint64_t begin = 0, end = 0;
  std::string name;
  bool operator<(const DataSpan& other) const { return begin < other.begin; }
};

// The spans must tile the data section, as the reference implementation requires: no gaps, no
// overlaps, nothing after the last tensor.
void check_tiling(const std::filesystem::path& path, std::vector<DataSpan> spans,
                  std::uint64_t data_bytes) {
  std::sort(spans.begin(), spans.end());
  std::uint64_t next = 0;
  for (const DataSpan& span : spans) {
    io::check_file(span.begin == next, path,
                   "tensor '" + span.name + "': data_offsets begin at " +
                       std::to_string(span.begin) + ", the tensors before end at " +
                       std::to_string(next) + " (tensors must not overlap or leave gaps)");
    next = span.end;
  }
  io::check_file(next == data_bytes, path,
                 std::to_string(data_bytes - next) + " bytes after the last tensor's data");
}

// Builds one tensor from its header entry, checking the entry against the data section.
HostTensor read_entry(const std::filesystem::path& path, const std::string& name, const Json& entry,
                      const std::byte* data, std::uint64_t data_bytes, DataSpan& span) {
  const std::string where = "tensor '" + name + "': ";
  io::check_file(entry.is_object() && entry.contains("dtype") && entry.contains("shape") &&
                     entry.contains("data_offsets"),
                 path, where + "needs 'dtype', 'shape' and 'data_offsets'");
  const Json& dtype_json = entry["dtype"];
  io::check_file(dtype_json.is_string(), path, where + "'dtype' must be a string");
  const std::optional<DType> dtype = dtype_of_name(dtype_json.get<std::string>());
  io::check_file(dtype.has_value(), path,
                 where + "unsupported dtype '" + dtype_json.get<std::string>() +
                     "' (supported: F32, F16, BF16, U8, I32)");

  std::vector<std::int64_t> shape;
  io::check_file(entry["shape"].is_array(), path, where + "'shape' must be an array");
  for (const Json& extent : entry["shape"]) {
    io::check_file(extent.is_number_unsigned() && extent.get<std::uint64_t>() < (1ull << 48), path,
                   where + "'shape' must hold non-negative integers");
    shape.push_back(extent.get<std::int64_t>());
  }
  const Json& offsets = entry["data_offsets"];
  io::check_file(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                     offsets[1].is_number_unsigned(),
                 path, where + "'data_offsets' must be [begin, end]");
  const auto begin = offsets[0].get<std::uint64_t>();
  const auto end = offsets[1].get<std::uint64_t>();
  io::check_file(begin <= end && end <= data_bytes, path,
                 where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] lie outside the " + std::to_string(data_bytes) +
                     "-byte data section (truncated file?)");

  // The shape is checked against the span before it sizes the tensor.
  const std::optional<std::int64_t> needed = io::tensor_bytes(*dtype, shape);
  io::check_file(needed && static_cast<std::uint64_t>(*needed) == end - begin, path,
                 where + "data_offsets span " + std::to_string(end - begin) +
                     " bytes, dtype and shape need " +
                     (needed ? std::to_string(*needed) : "more than 2^62"));
  HostTensor tensor = HostTensor::zeros(*dtype, std::move(shape));
  if (!tensor.bytes.empty()) std::memcpy(tensor.bytes.data(), data + begin, tensor.bytes.size());
  span = {begin, end, name};
  return tensor;
}

}  // namespace

namespace io {

NamedTensors parse_safetensors(std::span<const std::byte> file, const std::filesystem::path& path) {
  io::check_file(file.size() >= kLengthBytes, path, "truncated: no safetensors header length");
  std::uint64_t header_bytes = 0;
  for (std::size_t i = kLengthBytes; i-- > 0;) {
    header_bytes = (header_bytes << 8) | static_cast<std::uint8_t>(file[i]);
  }
  io::check_file(header_bytes <= kMaxHeaderBytes, path, "safetensors header length is implausible");
  io::check_file(file.size() - kLengthBytes >= header_bytes, path,
                 "truncated: the safetensors header runs past the end of the file");

  const char* header_text = reinterpret_cast<const char*>(file.data()) + kLengthBytes;
  Json header;
  try {
    header = Json::parse(header_text, header_text + header_bytes);
  } catch (const Json::exception& error) {  // parse_error, and out_of_range for huge numbers
    throw InvalidArgument(path.string(),
                          std::string("bad safetensors JSON header: ") + error.what());
  }
  io::check_file(header.is_object(), path, "the safetensors header must be a JSON object");

  const std::byte* data = file.data() + kLengthBytes + header_bytes;
  const std::uint64_t data_bytes = file.size() - kLengthBytes - header_bytes;
  NamedTensors tensors;
  std::vector<DataSpan> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    tensors.emplace_back(name,
                         read_entry(path, name, entry, data, data_bytes, spans.emplace_back()));
  }
  check_tiling(path, std::move(spans), data_bytes);
  return tensors;
}

}  // namespace io

NamedTensors read_safetensors(const std::filesystem::path& path) {
  return io::parse_safetensors(io::read_file_bytes(path), path);
}

void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors) {
  Json header = Json::object();
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    io::check_file(name != "__metadata__" && names.insert(name).second, path,
                   "tensor names must be unique and not '__metadata__' ('" + name + "')");
    io::check_file(
        tensor.bytes.size() == static_cast<std::size_t>(tensor.numel()) * dtype_bytes(tensor.dtype),
        path, "tensor '" + name + "': bytes do not match its shape");
    header[name] = {{"dtype", name_of_dtype(tensor.dtype)},
                    {"shape", tensor.shape},
                    {"data_offsets", {offset, offset + tensor.bytes.size()}}};
    offset += tensor.bytes.size();
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  text.append((kLengthBytes - text.size() % kLengthBytes) % kLengthBytes, ' ');
  std::string length(kLengthBytes, '\0');
  for (std::size_t i = 0; i < kLengthBytes; ++i) {
    length[i] = static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xff);
  }
  std::string data;
  data.reserve(offset);
  for (const auto& entry : tensors) {
    data.append(reinterpret_cast<const char*>(entry.second.bytes.data()),
                entry.second.bytes.size());
  }
  io::write_file_bytes(path, {length, text, data});
}

}  // namespace turbodecode
