#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "test_support.h"
#include "turbodecode/error.h"
#include "turbodecode/io.h"

namespace turbodecode {
namespace {

namespace fs = std::filesystem;

// A scratch directory per test, removed afterwards.
class TensorFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = testing::fresh_seed();
    dir_ = fs::temp_directory_path() / ("turbodecode_io_test_" + std::to_string(seed_));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path file(const std::string& name) const { return dir_ / name; }

  // Random bytes in a random shape of rank 0-4 (extents 0-5, so empty tensors occur too).
  HostTensor random_tensor(DType dtype, std::mt19937_64& rng) const {
    std::vector<std::int64_t> shape(rng() % 5);
    for (auto& extent : shape) extent = static_cast<std::int64_t>(rng() % 6);
    HostTensor tensor = HostTensor::zeros(dtype, shape);
    for (auto& byte : tensor.bytes) byte = static_cast<std::byte>(rng());
    return tensor;
  }

  static void write_raw(const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  static std::string read_raw(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // A version-1 .npy file with the given header dict and data bytes.
  static std::string npy_bytes(const std::string& dict, const std::string& data) {
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    return out + header + data;
  }
  static std::string safetensors_bytes(const std::string& json, const std::string& data) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
    return out + json + data;
  }

  // Expects InvalidArgument whose message contains `fragment`.
  template <class Read>
  static void expect_rejected(Read read, const std::string& fragment) {
    try {
      read();
      ADD_FAILURE() << "accepted a malformed file; expected an error mentioning " << fragment;
    } catch (const InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  }

  std::uint64_t seed_ = 0;
  fs::path dir_;
};

void expect_same(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_TRUE(a.bytes == b.bytes);
}

TEST_F(TensorFiles, NpyRoundTripsEveryDtype) {
  SCOPED_TRACE(seed_);
  std::mt19937_64 rng(seed_);
  for (DType dtype : {DType::f32, DType::f16, DType::u8, DType::i32}) {
    for (int trial = 0; trial < 8; ++trial) {
      const HostTensor tensor = random_tensor(dtype, rng);
      write_npy(file("t.npy"), tensor);
      expect_same(read_npy(file("t.npy")), tensor);
    }
  }
}

TEST_F(TensorFiles, NpyHeaderMatchesNumpy) {
  HostTensor tensor = HostTensor::zeros(DType::f32, {2, 3});
  write_npy(file("t.npy"), tensor);
  const std::string bytes = read_raw(file("t.npy"));
  EXPECT_EQ(bytes, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                             std::string(24, '\0')));
  write_npy(file("v.npy"), HostTensor::zeros(DType::u8, {7}));
  EXPECT_NE(read_raw(file("v.npy")).find("'shape': (7,), }"), std::string::npos);
}

TEST_F(TensorFiles, NpyReadsVersion2AndDoubleQuotes) {
  const std::string dict = "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2,)}\n";
  std::string bytes("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  const std::int32_t values[2] = {-7, 123456};
  bytes += dict + std::string(reinterpret_cast<const char*>(values), sizeof values);
  write_raw(file("v2.npy"), bytes);
  const HostTensor tensor = read_npy(file("v2.npy"));
  ASSERT_EQ(tensor.shape, std::vector<std::int64_t>{2});
  EXPECT_EQ(tensor.view().as<std::int32_t>()[0], -7);
  EXPECT_EQ(tensor.view().as<std::int32_t>()[1], 123456);
}

TEST_F(TensorFiles, NpyRejectsMalformedFiles) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  const auto reject = [&](const std::string& bytes, const std::string& fragment) {
    write_raw(file("bad.npy"), bytes);
    expect_rejected([&] { read_npy(file("bad.npy")); }, fragment);
  };
  reject(npy_bytes(ok_dict, std::string(12, '\0')), "truncated data");
  reject(npy_bytes(ok_dict, std::string(20, '\0')), "unexpected bytes");
  reject(npy_bytes(ok_dict, std::string(16, '\0')).substr(0, 30), "truncated .npy header");
  reject("PK\x03\x04 not numpy at all", "magic");
  reject(
      npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", std::string(32, '\0')),
      "unsupported dtype '<f8'");
  reject(
      npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", std::string(16, '\0')),
      "unsupported dtype '>f4'");
  reject(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                   std::string(16, '\0')),
         "Fortran");
  reject(npy_bytes("{'descr': '<f4', 'shape': (4,), }", std::string(16, '\0')), "bad .npy header");
  reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", ""),
         "bad .npy header");
  reject(npy_bytes("['<f4', False, (4,)]", std::string(16, '\0')), "bad .npy header");
  expect_rejected([&] { read_npy(file("missing.npy")); }, "cannot open");
  expect_rejected([&] { write_npy(file("b.npy"), HostTensor::zeros(DType::bf16, {2})); },
                  "safetensors");
}

// Extents whose product overflows before a later 0 make an empty tensor (found by
// fuzz/npy_fuzzer: the size was computed with an overflowing product).
TEST_F(TensorFiles, NpyHugeExtentsBesideAZeroAreEmpty) {
  write_raw(file("e.npy"), npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                     "(4294967296, 4294967296, 0), }",
                                     ""));
  const HostTensor tensor = read_npy(file("e.npy"));
  EXPECT_EQ(tensor.shape, (std::vector<std::int64_t>{4294967296, 4294967296, 0}));
  EXPECT_TRUE(tensor.bytes.empty());
}

TEST_F(TensorFiles, SafetensorsRoundTripsNamedTensorsInOrder) {
  SCOPED_TRACE(seed_);
  std::mt19937_64 rng(seed_);
  NamedTensors tensors;
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16, DType::u8, DType::i32};
  for (int i = 0; i < 10; ++i) {
    // Names run backwards (t9, t8, ...) so file order differs from sorted order.
    const char name[] = {'t', static_cast<char>('9' - i), '\0'};
    tensors.emplace_back(name, random_tensor(dtypes[i % 5], rng));
  }
  write_safetensors(file("t.safetensors"), tensors);
  const std::string raw = read_raw(file("t.safetensors"));
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, raw.data(), 8);
  EXPECT_EQ(header_bytes % 8, 0u) << "data section must start 8-byte aligned";

  const NamedTensors back = read_safetensors(file("t.safetensors"));
  ASSERT_EQ(back.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(back[i].first, tensors[i].first);
    expect_same(back[i].second, tensors[i].second);
  }
}

TEST_F(TensorFiles, SafetensorsReadsMetadataAndSkipsIt) {
  const float values[2] = {1.5f, -2.0f};
  write_raw(file("m.safetensors"),
            safetensors_bytes(R"({"__metadata__":{"format":"pt"},"x":{"dtype":"F32",)"
                              R"("shape":[2],"data_offsets":[0,8]}})",
                              std::string(reinterpret_cast<const char*>(values), 8)));
  const NamedTensors tensors = read_safetensors(file("m.safetensors"));
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].first, "x");
  EXPECT_EQ(tensors[0].second.view().as<float>()[1], -2.0f);
}

TEST_F(TensorFiles, SafetensorsRejectsMalformedFiles) {
  const auto reject = [&](const std::string& bytes, const std::string& fragment) {
    write_raw(file("bad.safetensors"), bytes);
    expect_rejected([&] { read_safetensors(file("bad.safetensors")); }, fragment);
  };
  const std::string entry = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  reject(safetensors_bytes(entry, std::string(4, '\0')), "truncated");
  reject(safetensors_bytes(entry, "").substr(0, 20), "truncated");
  reject(std::string(5, '\0'), "truncated");
  reject(safetensors_bytes("{\"x\": {\"dtype\": ", std::string(8, '\0')), "bad safetensors JSON");
  // A number too large for a double (found by fuzz/safetensors_fuzzer).
  reject(safetensors_bytes(R"({"x": 7E555555555})", ""), "bad safetensors JSON");
  reject(safetensors_bytes("[1, 2]", ""), "JSON object");
  reject(safetensors_bytes(R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
                           std::string(8, '\0')),
         "unsupported dtype 'F64'");
  reject(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                           std::string(8, '\0')),
         "need 12");
  reject(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[2]}})", std::string(8, '\0')),
         "data_offsets");
  reject(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
                           std::string(8, '\0')),
         "non-negative");
  NamedTensors duplicate;
  duplicate.emplace_back("x", HostTensor::zeros(DType::f32, {1}));
  duplicate.emplace_back("x", HostTensor::zeros(DType::f32, {1}));
  expect_rejected([&] { write_safetensors(file("d.safetensors"), duplicate); }, "unique");
}

TEST(HostTensor, ViewsAreContiguousUpToRankFour) {
  const HostTensor tensor = HostTensor::zeros(DType::f16, {2, 3, 4});
  const TensorView view = tensor.view();
  EXPECT_EQ(view.rank, 3);
  EXPECT_EQ(view.strides[0], 12);
  EXPECT_TRUE(view.is_contiguous());
  EXPECT_EQ(view.span_bytes(), 48);
  EXPECT_THROW(HostTensor::zeros(DType::u8, {1, 1, 1, 1, 1}).view(), InvalidArgument);
}

}  // namespace
}  // namespace turbodecode
