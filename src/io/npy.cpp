// NumPy .npy files (format spec: numpy/lib/format.py): magic, version, header length, a Python
// dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}, padding, raw data.
#include <cctype>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "io/file_bytes.h"
#include "io/parse.h"
#include "turbodecode/error.h"
#include "turbodecode/io.h"

namespace turbodecode {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kHeaderAlignment = 64;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

// Reads the header's Python dict literal. Only the subset numpy writes is accepted: string
// keys, a string, a boolean and a tuple of non-negative integers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::filesystem::path& path)
      : text_(text), path_(path) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (!accept('}')) {
      const std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        header.descr = parse_string();
        seen_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = parse_bool();
        seen_order = true;
      } else if (key == "shape") {
        header.shape = parse_shape();
        seen_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    if (!seen_descr || !seen_order || !seen_shape) {
      fail("needs the keys 'descr', 'fortran_order' and 'shape'");
    }
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(path_.string(), "bad .npy header: " + what);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "' at offset " + std::to_string(pos_));
  }
  std::string parse_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      fail("expected a quoted string at offset " + std::to_string(pos_));
    }
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }
  bool parse_bool() {
    skip_space();
    for (std::string_view word : {std::string_view("True"), std::string_view("False")}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return word == "True";
      }
    }
    fail("'fortran_order' must be True or False");
  }
  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> shape;
    expect('(');
    while (!accept(')')) {
      skip_space();
      std::int64_t extent = 0;
      bool digits = false;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        extent = extent * 10 + (text_[pos_++] - '0');
        digits = true;
        if (extent > (std::int64_t{1} << 48)) fail("shape extent too large");
      }
      if (!digits) fail("'shape' must be a tuple of non-negative integers");
      shape.push_back(extent);
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  std::string_view text_;
  const std::filesystem::path& path_;
  std::size_t pos_ = 0;
};

std::optional<DType> dtype_of_descr(std::string_view descr) {
  if (descr == "<f4") return DType::f32;
  if (descr == "<f2") return DType::f16;
  if (descr == "<i4") return DType::i32;
  if (descr == "|u1" || descr == "<u1" || descr == "u1") return DType::u8;
  return std::nullopt;
}

const char* descr_of_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "<f4";
    case DType::f16:
      return "<f2";
    case DType::i32:
      return "<i4";
    case DType::u8:
      return "|u1";
    case DType::bf16:
      break;
  }
  return nullptr;
}

// Python's repr of a tuple of ints: (), (3,), (3, 4).
std::string python_tuple(const std::vector<std::int64_t>& values) {
  std::string text = "(";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(values[i]);
  }
  return text + (values.size() == 1 ? ",)" : ")");
}

std::uint32_t read_le(const std::byte* p, int bytes) {
  std::uint32_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | static_cast<std::uint8_t>(p[i]);
  return value;
}

}  // namespace

namespace io {

HostTensor parse_npy(std::span<const std::byte> file, const std::filesystem::path& path) {
  io::check_file(file.size() >= kMagic.size() + 2 &&
                     std::memcmp(file.data(), kMagic.data(), kMagic.size()) == 0,
                 path, "not a .npy file (missing the \\x93NUMPY magic)");
  const int major = static_cast<int>(file[kMagic.size()]);
  io::check_file(major >= 1 && major <= 3, path,
                 ".npy format version " + std::to_string(major) + " is not supported (1-3)");
  const int length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = kMagic.size() + 2 + static_cast<std::size_t>(length_bytes);
  io::check_file(file.size() >= prefix, path, "truncated .npy header");
  const std::size_t header_length = read_le(file.data() + prefix - length_bytes, length_bytes);
  io::check_file(file.size() - prefix >= header_length, path, "truncated .npy header");

  const std::string_view text(reinterpret_cast<const char*>(file.data()) + prefix, header_length);
  const NpyHeader header = HeaderParser(text, path).parse();
  io::check_file(!header.fortran_order, path,
                 "Fortran-order arrays are not supported; save np.ascontiguousarray(x)");
  const std::optional<DType> dtype = dtype_of_descr(header.descr);
  io::check_file(dtype.has_value(), path,
                 "unsupported dtype '" + header.descr + "' (supported: <f4, <f2, |u1, <i4)");

  // The shape is checked against the bytes present before it sizes the tensor.
  const std::size_t data_offset = prefix + header_length;
  const auto available = static_cast<std::int64_t>(file.size() - data_offset);
  const std::optional<std::int64_t> needed = io::tensor_bytes(*dtype, header.shape);
  io::check_file(needed && *needed <= available, path,
                 "truncated data: the header's shape " + python_tuple(header.shape) + " needs " +
                     (needed ? std::to_string(*needed) : "more than 2^62") +
                     " bytes, the file holds " + std::to_string(available));
  io::check_file(*needed == available, path,
                 std::to_string(available - *needed) + " unexpected bytes after the array data");
  HostTensor tensor = HostTensor::zeros(*dtype, header.shape);
  if (!tensor.bytes.empty()) {
    std::memcpy(tensor.bytes.data(), file.data() + data_offset, tensor.bytes.size());
  }
  return tensor;
}

}  // namespace io

HostTensor read_npy(const std::filesystem::path& path) {
  return io::parse_npy(io::read_file_bytes(path), path);
}

void write_npy(const std::filesystem::path& path, const HostTensor& tensor) {
  const char* descr = descr_of_dtype(tensor.dtype);
  io::check_file(descr != nullptr, path,
                 std::string(dtype_name(tensor.dtype)) + " has no .npy dtype; use .safetensors");
  io::check_file(
      tensor.bytes.size() == static_cast<std::size_t>(tensor.numel()) * dtype_bytes(tensor.dtype),
      path, "tensor bytes do not match its shape");
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': " + python_tuple(tensor.shape);
  dict += ", }";

  // Version 1 stores the header length in 2 bytes; longer headers need version 2.
  const bool version2 = dict.size() + 1 + kMagic.size() + 4 + kHeaderAlignment > 0xffff;
  const std::size_t prefix = kMagic.size() + 2 + (version2 ? 4 : 2);
  const std::size_t unpadded = prefix + dict.size() + 1;
  dict.append((kHeaderAlignment - unpadded % kHeaderAlignment) % kHeaderAlignment, ' ');
  dict += '\n';

  std::string head(kMagic);
  head += static_cast<char>(version2 ? 2 : 1);
  head += '\0';
  const std::size_t length = dict.size();
  for (int i = 0; i < (version2 ? 4 : 2); ++i)
    head += static_cast<char>((length >> (8 * i)) & 0xff);
  const std::string_view data(reinterpret_cast<const char*>(tensor.bytes.data()),
                              tensor.bytes.size());
  io::write_file_bytes(path, {head, dict, data});
}

}  // namespace turbodecode
