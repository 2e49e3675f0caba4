// SPEC §7 and §7.1 through the CLI binary: each rule's bad input fails with an error naming the
// flag or file the user typed, and writes nothing (the --output file stays absent, or keeps its
// bytes when it already existed).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "turbodecode/io.h"

namespace turbodecode {
namespace {

class CliRules : public testing::CliFixture {
 protected:
  static constexpr int kTokens = 4, kHeads = 2, kKvHeads = 1, kDim = 256;

  void SetUp() override {
    testing::CliFixture::SetUp();
    if (!IsSkipped()) write_good_step();
  }

  // A good step: q [1, 2, 256], k and v [4, 1, 256], f32 random values.
  void write_good_step() const {
    write("q.npy", testing::gaussian(kHeads * kDim, seed_), {1, kHeads, kDim});
    write("k.npy", testing::gaussian(kTokens * kKvHeads * kDim, seed_ + 1),
          {kTokens, kKvHeads, kDim});
    write("v.npy", testing::gaussian(kTokens * kKvHeads * kDim, seed_ + 2),
          {kTokens, kKvHeads, kDim});
  }

  void write(const std::string& name, const std::vector<float>& values,
             std::vector<std::int64_t> shape) const {
    write_npy(path(name), HostTensor::copy_of(values.data(), DType::f32, std::move(shape)));
  }
  void write_i32(const std::string& name, const std::vector<std::int32_t>& values) const {
    write_npy(path(name), HostTensor::copy_of(values.data(), DType::i32,
                                              {static_cast<std::int64_t>(values.size())}));
  }
  void write_bytes(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  // `turbodecode attention --q q.npy --k k.npy --v v.npy <extra> --output out.npy`.
  static std::string attention(const std::string& extra) {
    return "attention --q q.npy --k k.npy --v v.npy " + extra + " --output out.npy";
  }

  // Runs `arguments`, which must fail naming `argument` (and mentioning `fragment`) without
  // writing out.npy or lse.npy.
  void expect_rejected(const std::string& arguments, const std::string& argument,
                       const std::string& fragment = "") const {
    SCOPED_TRACE(arguments);
    const testing::CommandResult result = run(arguments);
    EXPECT_NE(result.exit_code, 0) << result.out;
    EXPECT_NE(result.err.find(argument), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(fragment), std::string::npos) << result.err;
    EXPECT_FALSE(std::filesystem::exists(path("out.npy"))) << "written despite the error";
    EXPECT_FALSE(std::filesystem::exists(path("lse.npy"))) << "written despite the error";
  }
};

// The good step runs: the rejections below are each due to the one input they change.
TEST_F(CliRules, TheBaseStepRuns) {
  const testing::CommandResult result = run(attention("--json"));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(std::filesystem::exists(path("out.npy")));
}

TEST_F(CliRules, UnsupportedHeadDimOrFormatNamesTheFlag) {
  write("k.npy", testing::gaussian(kTokens * 128, seed_), {kTokens, 1, 128});
  write("v.npy", testing::gaussian(kTokens * 128, seed_), {kTokens, 1, 128});
  expect_rejected(attention(""), "--k", "256 or 512");
  write_good_step();
  expect_rejected(attention("--v-format tq7"), "--v-format", "must be one of");
  expect_rejected(attention("--k-format q8"), "--k-format", "must be one of");
  expect_rejected(attention("--k-format tq5"), "--k-format", "reads K as");
  expect_rejected("--k-format tq3", "--k-format", "reads K as");
  expect_rejected("encode k.npy --format f16 --output c.safetensors", "--format",
                  "quantized format");
}

TEST_F(CliRules, HeadsNotAMultipleOfKvHeadsNamesQ) {
  write("k.npy", testing::gaussian(kTokens * 3 * kDim, seed_), {kTokens, 3, kDim});
  write("v.npy", testing::gaussian(kTokens * 3 * kDim, seed_), {kTokens, 3, kDim});
  expect_rejected(attention(""), "--q", "multiple of k's KV heads");
}

TEST_F(CliRules, QuerySlotWithoutTokensNamesQSlot) {
  write_i32("q_slot.npy", {1});
  expect_rejected(attention("--q-slot q_slot.npy"), "--q-slot", "no token was appended to slot 1");
}

TEST_F(CliRules, PositionBeyondALinearCacheNamesKvPos) {
  write_i32("kv_pos.npy", {0, 1, 2, 9});
  expect_rejected(attention("--kv-pos kv_pos.npy --capacity 8"), "--kv-pos",
                  "does not fit a linear cache");
}

TEST_F(CliRules, NegativeOrZeroSizesNameTheirSource) {
  write_i32("kv_pos.npy", {0, 1, -2, 3});
  expect_rejected(attention("--kv-pos kv_pos.npy"), "--kv-pos", "must be >= 0");
  expect_rejected(attention("--capacity -3"), "--capacity");
  expect_rejected(attention("--window -1"), "--window");
  write("q.npy", {}, {0, kHeads, kDim});
  expect_rejected(attention(""), "--q", "holds no queries");
}

TEST_F(CliRules, MalformedFilesNameTheFile) {
  write_bytes("q.npy", std::string("\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'", 24));
  expect_rejected(attention(""), "q.npy", "truncated .npy header");
  write_good_step();
  write_bytes("k.npy", std::string("not a tensor file"));
  expect_rejected(attention(""), "k.npy", "magic");
}

TEST_F(CliRules, MismatchedDtypesAndShapesNameTheTensor) {
  write("kv_pos.npy", {0, 1, 2, 3}, {4});
  expect_rejected(attention("--kv-pos kv_pos.npy"), "--kv-pos", "int32");
  write("v.npy", testing::gaussian(3 * kDim, seed_), {3, 1, kDim});
  expect_rejected(attention(""), "--v", "shape of k");
  write_good_step();
  write_i32("q_pos.npy", {1, 2});
  expect_rejected(attention("--q-pos q_pos.npy"), "--q-pos", "one entry per query");
}

TEST_F(CliRules, TensorsFromInputsAreNamedThroughInputs) {
  NamedTensors bundle;
  bundle.emplace_back("q", read_npy(path("q.npy")));
  bundle.emplace_back("k", read_npy(path("k.npy")));
  bundle.emplace_back("v", read_npy(path("v.npy")));
  const std::vector<std::int32_t> positions = {0, 1, 2, 5};
  bundle.emplace_back("q_pos", HostTensor::copy_of(positions.data() + 3, DType::i32, {1}));
  write_safetensors(path("step.safetensors"), bundle);
  expect_rejected("attention --inputs step.safetensors --output out.npy", "--inputs",
                  "tensor 'q_pos'");
}

// SPEC §7.1: slots, positions and sizes from files and flags are bounded before they size the
// cache (no allocation: these fail at once instead of with std::bad_alloc).
TEST_F(CliRules, SizesBeyondTheLimitsAreRejectedBeforeAllocating) {
  write_i32("kv_slot.npy", {0, 0, 0, 2000000000});
  expect_rejected(attention("--kv-slot kv_slot.npy"), "--kv-slot", "beyond the limit");
  write_i32("kv_pos.npy", {0, 1, 2, 2000000000});
  expect_rejected(attention("--kv-pos kv_pos.npy"), "--kv-pos", "beyond the limit");
  expect_rejected(attention("--capacity 1000000000000"), "--capacity", "beyond the limit");
  expect_rejected(attention("--layer ring --window 1000000000000"), "--window", "beyond the limit");
  // A paged cache holds whole pages: 10^6 slots fit the limit in rows of 4 positions (3.1 GB),
  // not in pages of 128 rows.
  write_i32("kv_slot.npy", {0, 0, 0, 1000000});
  expect_rejected(attention("--kv-slot kv_slot.npy --page-size 128"), "--kv-slot",
                  "in pages of 128");
  // A shape whose bytes overflow, in a file of a few bytes.
  const std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (281474976710656, 281474976710656), }\n";
  write_bytes("k.npy", std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) +
                           std::string(1, '\0') + dict);
  expect_rejected(attention(""), "k.npy", "truncated data");
  expect_rejected("--context 100000000", "--context");
  expect_rejected("--threads 100000", "--threads");
  expect_rejected("hc --embd 65536 --rows 65536", "--rows", "2^26");
  expect_rejected("hc --shared-width 100", "--shared-width", "multiple of 32");
}

// SPEC §7.1: a query may only see positions appended to its slot and still held by their rows.
TEST_F(CliRules, QueriesSeeOnlyAppendedPositions) {
  write_i32("q_pos.npy", {7});
  expect_rejected(attention("--q-pos q_pos.npy"), "--q-pos",
                  "sees position 4, which was never appended to slot 0");
  // Sparse positions: the default query at position 9 sees positions 3 to 8, never appended.
  write_i32("kv_pos.npy", {0, 1, 2, 9});
  expect_rejected(attention("--kv-pos kv_pos.npy"), "--q-pos", "sees position 3");
  // A ring of 2 rows: position 3 overwrote the row of position 1, which the query at 2 sees.
  write_i32("q_pos.npy", {2});
  expect_rejected(attention("--q-pos q_pos.npy --layer ring --window 2"), "--q-pos",
                  "whose cache row holds position 3 instead");
}

// SPEC §7.1: empty inputs get a clear error (once a segmentation fault).
TEST_F(CliRules, EmptyInputsGetAClearError) {
  write("k.npy", {}, {0, kKvHeads, kDim});
  write("v.npy", {}, {0, kKvHeads, kDim});
  expect_rejected(attention(""), "--k", "holds no tokens");
  write_good_step();
  write("k.npy", {}, {kTokens, 0, kDim});
  write("v.npy", {}, {kTokens, 0, kDim});
  expect_rejected(attention(""), "--k", "holds no heads");
  write("x.npy", {}, {0, kDim});
  expect_rejected("encode x.npy --output out.npy", "--output", ".safetensors");
  expect_rejected("encode x.npy", "x.npy", "holds no rows");
}

// Values the library would reject are reported with the flag, not the library's field name.
TEST_F(CliRules, ErrorsNameTheFlagNotTheLibraryField) {
  expect_rejected(attention("--scale nan"), "--scale", "finite");
  expect_rejected(attention("--softcap -1"), "--softcap", "finite number >= 0");
  expect_rejected(attention("--scale-factor-d512 inf"), "--scale-factor-d512", "finite");
  expect_rejected(attention("--layer ring --mask causal"), "--mask", "sliding-ring");
  expect_rejected(attention("--mask sliding-ring"), "--mask", "ring layer");
  expect_rejected("--k-format tq9", "--k-format", "must be one of");
  expect_rejected(attention("--output out.txt"), "--output", ".npy or .safetensors");
  expect_rejected(attention("--lse lse.txt"), "--lse", ".npy or .safetensors");
  expect_rejected(attention("--page-size 48"), "--page-size");
}

// SPEC §2.8 through the CLI: runs of --query-tokens queries are one slot's consecutive tokens.
// The rules plan_decode and run_decode check are reported against what the user typed.
TEST_F(CliRules, QueryRunsNameQueryTokensOrTheirIndices) {
  write("q.npy", testing::gaussian(2 * kHeads * kDim, seed_), {2, kHeads, kDim});
  const std::string lse = " --lse lse.npy";
  expect_rejected(attention("--query-tokens 4" + lse), "--query-tokens",
                  "must divide the number of queries");
  expect_rejected(attention("--query-tokens 9" + lse), "--query-tokens");
  expect_rejected(attention("--query-tokens 2 --layer ring" + lse), "--query-tokens",
                  "sliding_window");
  write_i32("q_pos.npy", {3, 1});
  expect_rejected(attention("--query-tokens 2 --q-pos q_pos.npy" + lse), "--q-pos",
                  "must be one more than entry 0");
  write_i32("q_slot.npy", {0, 1});
  write_i32("kv_slot.npy", {0, 0, 1, 1});
  expect_rejected(attention("--query-tokens 2 --q-slot q_slot.npy --kv-slot kv_slot.npy" + lse),
                  "--q-slot", "must name the same slot");
  write("q.npy", testing::gaussian(8 * kHeads * kDim, seed_), {8, kHeads, kDim});
  expect_rejected(attention("--query-tokens 8" + lse), "--query-tokens",
                  "at least query_tokens positions");
}

// Found by fuzz/cli_fuzzer: an empty argument before an unknown option once sent the parser
// into an endless loop. `timeout` turns a hang into a failure.
TEST_F(CliRules, AnEmptyArgumentIsAnErrorNotAHang) {
  const std::string binary = testing::cli_path().string();
  const int status = std::system(("timeout 20 " + binary + " \"\" --foo >/dev/null 2>&1").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 124) << "timed out";
  EXPECT_NE(WEXITSTATUS(status), 0);
}

// A rejected run leaves an existing output file as it was.
TEST_F(CliRules, ARejectedRunLeavesAnExistingOutputUnchanged) {
  write_bytes("out.npy", "previous result");
  write_i32("q_pos.npy", {7});
  const testing::CommandResult result = run(attention("--q-pos q_pos.npy"));
  EXPECT_NE(result.exit_code, 0);
  std::ifstream in(path("out.npy"), std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "previous result");
}

}  // namespace
}  // namespace turbodecode
