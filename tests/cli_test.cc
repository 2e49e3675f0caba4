// Runs the turbodecode CLI binary on small inputs and checks what it prints and writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "common/f16.h"
#include "reference/attention_oracle.h"
#include "turbodecode/io.h"

namespace turbodecode {
namespace {

class Cli : public testing::CliFixture {};

HostTensor f32_tensor(const std::vector<float>& values, std::vector<std::int64_t> shape) {
  return HostTensor::copy_of(values.data(), DType::f32, std::move(shape));
}

HostTensor bf16_tensor(const std::vector<float>& values, std::vector<std::int64_t> shape) {
  std::vector<std::uint16_t> halves(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) halves[i] = f32_to_bf16(values[i]);
  return HostTensor::copy_of(halves.data(), DType::bf16, std::move(shape));
}

HostTensor f16_tensor(const std::vector<float>& values, std::vector<std::int64_t> shape) {
  std::vector<std::uint16_t> halves(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) halves[i] = f32_to_f16(values[i]);
  return HostTensor::copy_of(halves.data(), DType::f16, std::move(shape));
}

TEST_F(Cli, EncodeReportsRoundTripQualityAndWritesCodes) {
  SCOPED_TRACE(seed_);
  const int rows = 24, dim = 512;
  std::vector<float> x = testing::gaussian(rows * dim, seed_);
  for (int r = 0; r < rows; ++r) x[static_cast<std::size_t>(r * dim + 3)] *= 30.0f;  // outliers
  write_npy(path("x.npy"), f32_tensor(x, {2, rows / 2, dim}));

  const nlohmann::json report =
      parse_json(run("encode " + path("x.npy") + " --json --output " + path("codes.safetensors")));
  EXPECT_EQ(report["rows"], rows);
  // Every quantized format, in kRowFormats order: fp8, tq3, tq4, tq5, tq6, tq8.
  ASSERT_EQ(report["formats"].size(), 6u);
  const double floor_cosine[] = {0.999, 0.98, 0.99, 0.998, 0.999, 0.9999};  // SPEC §1.2
  const std::int64_t bytes_per_row[] = {512 + 4, 192 + 8, 256 + 8, 320 + 8, 384 + 8, 512 + 8};
  for (int f = 0; f < 6; ++f) {
    EXPECT_GE(report["formats"][f]["cosine_mean"].get<double>(), floor_cosine[f]);
    EXPECT_EQ(report["formats"][f]["bytes_per_row"], bytes_per_row[f]);
  }
  EXPECT_EQ(report["formats"][0]["format"], "fp8");

  const NamedTensors written = read_safetensors(path("codes.safetensors"));
  ASSERT_EQ(written.size(), 18u);
  EXPECT_EQ(written[0].first, "fp8.codes");
  EXPECT_EQ(written[1].first, "fp8.scales");
  EXPECT_EQ(written[1].second.shape, (std::vector<std::int64_t>{2, rows / 2, 1}));
  EXPECT_EQ(written[3].first, "tq3.codes");
  EXPECT_EQ(written[3].second.shape, (std::vector<std::int64_t>{2, rows / 2, dim * 3 / 8}));
  EXPECT_EQ(written[4].first, "tq3.norms");
  EXPECT_EQ(written[4].second.shape, (std::vector<std::int64_t>{2, rows / 2, 2}));
  const HostTensor& decoded = written[17].second;  // tq8.decoded
  EXPECT_EQ(decoded.shape, (std::vector<std::int64_t>{2, rows / 2, dim}));
  const float* values = decoded.view().as<const float>();
  std::vector<double> original(x.begin(), x.end());
  EXPECT_LT(testing::relative_l2(std::vector<float>(values, values + x.size()), original), 0.02);
}

TEST_F(Cli, AttentionMatchesExactAttentionOnUserTensors) {
  SCOPED_TRACE(seed_);
  const int tokens = 200, heads = 8, kv_heads = 2, dim = 256;
  const std::vector<float> q = testing::gaussian(heads * dim, seed_);
  const std::vector<float> k = testing::gaussian(tokens * kv_heads * dim, seed_ + 1);
  const std::vector<float> v = testing::gaussian(tokens * kv_heads * dim, seed_ + 2);
  NamedTensors bundle;
  bundle.emplace_back("q", f32_tensor(q, {heads, dim}));
  bundle.emplace_back("k", f16_tensor(k, {tokens, kv_heads, dim}));
  bundle.emplace_back("v", bf16_tensor(v, {tokens, kv_heads, dim}));
  write_safetensors(path("step.safetensors"), bundle);

  const nlohmann::json report = parse_json(run("attention --inputs " + path("step.safetensors") +
                                               " --v-format tq8 --json --output " + path("o.npy")));
  EXPECT_GE(report["cosine_min"].get<double>(), 0.9995);

  // Independent check of the written output: exact attention over the keys and values as the
  // file holds them (f16 and bf16).
  std::vector<float> k_stored(k.size()), v_stored(v.size());
  for (std::size_t i = 0; i < k.size(); ++i) k_stored[i] = f16_to_f32(f32_to_f16(k[i]));
  for (std::size_t i = 0; i < v.size(); ++i) v_stored[i] = bf16_to_f32(f32_to_bf16(v[i]));
  const std::vector<double> exact =
      oracle::exact_attention(q, k_stored, v_stored, heads, kv_heads, dim, 0.0, 0.0);
  const HostTensor out = read_npy(path("o.npy"));
  ASSERT_EQ(out.shape, (std::vector<std::int64_t>{1, heads, dim}));
  const float* o = out.view().as<const float>();
  EXPECT_GE(testing::cosine(std::vector<float>(o, o + exact.size()), exact), 0.9995);
}

// Three queries as one run of a slot's last three tokens (--query-tokens): each row attends
// to the positions up to its own, and --lse writes log Σ exp(score) of each row and head.
TEST_F(Cli, AttentionRunsWriteTheLseOfEachRow) {
  SCOPED_TRACE(seed_);
  const int tokens = 120, rows = 3, heads = 4, kv_heads = 2, dim = 256;
  const std::vector<float> q = testing::gaussian(rows * heads * dim, seed_);
  const std::vector<float> k = testing::gaussian(tokens * kv_heads * dim, seed_ + 1);
  const std::vector<float> v = testing::gaussian(tokens * kv_heads * dim, seed_ + 2);
  write_npy(path("q.npy"), f32_tensor(q, {rows, heads, dim}));
  write_npy(path("k.npy"), f32_tensor(k, {tokens, kv_heads, dim}));
  write_npy(path("v.npy"), f32_tensor(v, {tokens, kv_heads, dim}));
  const std::string inputs =
      "attention --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy");

  const nlohmann::json report = parse_json(
      run(inputs + " --query-tokens 3 --json --lse " + path("lse.npy") + " --v-format tq8"));
  EXPECT_EQ(report["query_tokens"], 3);
  EXPECT_GE(report["cosine_min"].get<double>(), 0.9995);
  const HostTensor lse = read_npy(path("lse.npy"));
  ASSERT_EQ(lse.shape, (std::vector<std::int64_t>{rows, heads}));
  for (int r = 0; r < rows; ++r) {
    const int position = tokens - rows + r;
    for (int h = 0; h < heads; ++h) {
      std::vector<double> scores;
      for (int t = 0; t <= position; ++t) {
        double dot = 0.0;
        for (int j = 0; j < dim; ++j) {
          const float key = f16_to_f32(f32_to_f16(k[((t * kv_heads) + h / 2) * dim + j]));
          dot += static_cast<double>(q[(r * heads + h) * dim + j]) * key;
        }
        scores.push_back(dot / 16.0);
      }
      const double max = *std::max_element(scores.begin(), scores.end());
      double total = 0.0;
      for (double score : scores) total += std::exp(score - max);
      EXPECT_NEAR(lse.view().as<const float>()[r * heads + h], max + std::log(total), 1e-4)
          << "row " << r << " head " << h;
    }
  }

  const testing::CommandResult ragged = run(inputs + " --query-tokens 2");
  EXPECT_NE(ragged.exit_code, 0);
  EXPECT_NE(ragged.err.find("--query-tokens"), std::string::npos) << ragged.err;
}

// --page-size: the same step through a paged cache (a shuffled block table) writes the same
// output and lse as through the contiguous cache, bit for bit; on a ring layer too, with tokens
// that wrap it.
TEST_F(Cli, AttentionOnPagesEqualsContiguous) {
  SCOPED_TRACE(seed_);
  const int tokens = 300, heads = 4, kv_heads = 2, dim = 256;
  write_npy(path("q.npy"), f32_tensor(testing::gaussian(2 * heads * dim, seed_), {2, heads, dim}));
  write_npy(path("k.npy"), f32_tensor(testing::gaussian(tokens * kv_heads * dim, seed_ + 1),
                                      {tokens, kv_heads, dim}));
  write_npy(path("v.npy"), f32_tensor(testing::gaussian(tokens * kv_heads * dim, seed_ + 2),
                                      {tokens, kv_heads, dim}));
  const std::string inputs = "attention --q " + path("q.npy") + " --k " + path("k.npy") + " --v " +
                             path("v.npy") + " --query-tokens 2 --k-format fp8";
  for (const std::string layer : {"", " --layer ring --window 100 --capacity 120"}) {
    SCOPED_TRACE(layer);
    const auto step = [&](const std::string& name, const std::string& flags) {
      const testing::CommandResult result =
          run(inputs + layer + flags + " --output " + path(name + ".npy") + " --lse " +
              path(name + "_lse.npy"));
      EXPECT_EQ(result.exit_code, 0) << result.err;
      return std::pair{read_npy(path(name + ".npy")), read_npy(path(name + "_lse.npy"))};
    };
    const auto [flat_out, flat_lse] = step("flat", "");
    for (const int page : {16, 128}) {
      const std::string name = "paged" + std::to_string(page);
      const auto [paged_out, paged_lse] = step(name, " --page-size " + std::to_string(page));
      const nlohmann::json report =
          parse_json(run(inputs + layer + " --json --page-size " + std::to_string(page)));
      const std::int64_t capacity = report["capacity"];
      EXPECT_EQ(report["pages"], (capacity + page - 1) / page);  // one slot
      ASSERT_EQ(paged_out.shape, flat_out.shape);
      EXPECT_EQ(std::memcmp(paged_out.view().data, flat_out.view().data,
                            static_cast<std::size_t>(paged_out.view().span_bytes())),
                0)
          << "page " << page;
      EXPECT_EQ(std::memcmp(paged_lse.view().data, flat_lse.view().data,
                            static_cast<std::size_t>(paged_lse.view().span_bytes())),
                0)
          << "page " << page;
    }
  }
  EXPECT_NE(run(inputs + " --page-size 48").exit_code, 0);
}

TEST_F(Cli, MainJobReportsEveryFormat) {
  SCOPED_TRACE(seed_);
  const nlohmann::json report =
      parse_json(run("--context 300 --steps 3 --v-formats tq4,tq8,f16 --json --seed " +
                     std::to_string(seed_ % 100000)));
  ASSERT_EQ(report["formats"].size(), 3u);
  const nlohmann::json& tq8 = report["formats"][1];
  EXPECT_EQ(tq8["v_format"], "tq8");
  // Sliding layer: ring of 1024 rows, 8 KV heads, 772 bytes per position at D 256 (SPEC §1.3).
  EXPECT_EQ(tq8["layers"][0]["cache_bytes"], 772 * 8 * 1024);
  EXPECT_EQ(tq8["layers"][0]["f16_cache_bytes"], 1024 * 8 * 1024);
  EXPECT_EQ(tq8["step_ms"].size(), 3u);
  for (const nlohmann::json& format : report["formats"]) {
    for (const nlohmann::json& layer : format["layers"]) {
      EXPECT_GE(layer["cosine_mean"].get<double>(), format["v_format"] == "tq4" ? 0.99 : 0.9995)
          << format["v_format"] << " " << layer["name"];
    }
  }
}

TEST_F(Cli, MainJobMeasuresEveryVFormatByDefault) {
  SCOPED_TRACE(seed_);
  const nlohmann::json report =
      parse_json(run("--context 64 --steps 1 --json --seed " + std::to_string(seed_ % 100000)));
  std::vector<std::string> formats;
  for (const nlohmann::json& format : report["formats"]) formats.push_back(format["v_format"]);
  EXPECT_EQ(formats, (std::vector<std::string>{"tq3", "tq4", "tq5", "tq6", "tq8", "fp8", "f16"}));
}

TEST_F(Cli, HcChainAgreesWithTheOracle) {
  SCOPED_TRACE(seed_);
  const nlohmann::json report = parse_json(
      run("hc --n-hc 4 --embd 256 --rows 3 --shared-width 64 --repeats 2 --json --seed " +
          std::to_string(seed_ % 100000)));
  EXPECT_EQ(report["checked_rows"], 3);
  ASSERT_EQ(report["relative_l2"].size(), 4u);
  for (const auto& [output, error] : report["relative_l2"].items()) {
    EXPECT_LE(error.get<double>(), 1e-5) << output;  // SPEC §5: f32 paths within 1e-5
  }
  EXPECT_GT(report["us_per_call"]["layer (all four)"].get<double>(), 0.0);
}

TEST_F(Cli, BadInputsFailWithClearMessages) {
  std::FILE* file = std::fopen(path("bad.npy").c_str(), "wb");
  std::fputs("\x93NUMPY\x01\x00\x10\x00{'descr': '<f8'", file);
  std::fclose(file);
  testing::CommandResult result = run("encode " + path("bad.npy"));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("bad.npy"), std::string::npos) << result.err;

  write_npy(path("odd.npy"), HostTensor::zeros(DType::f32, {4, 100}));
  result = run("encode " + path("odd.npy"));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("256 or 512"), std::string::npos) << result.err;

  result = run("encode " + path("odd.npy") + " --steps 3");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("main job"), std::string::npos) << result.err;

  result = run("--v-formats tq7 --context 10 --steps 1");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("format"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace turbodecode
