// Query runs (SPEC §2.8), batch invariance (§2.6) and the lse (§2.9) on the CPU backend: every
// row of a run, of any batch and on any thread count is bitwise the row run alone, and partial
// results over disjoint positions merge through their lse into the whole.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cpu_decode_call.h"
#include "reference/attention_oracle.h"
#include "test_support.h"
#include "turbodecode/attention.h"
#include "turbodecode/kv_cache.h"

extern char** environ;

namespace turbodecode {
namespace {

using testing::DecodeCall;
using testing::fill_random;
using testing::fresh_seed;

struct RunsCase {
  KvCacheConfig config;
  DecodeOptions options;
  std::vector<std::int32_t> slots, positions;

  std::string describe() const {
    std::string s = std::string("D=") + std::to_string(config.head_dim) +
                    " K=" + format_name(config.k_format) + " V=" + format_name(config.v_format) +
                    " kind=" + (config.kind == LayerKind::ring ? "ring" : "linear") +
                    " heads=" + std::to_string(options.n_heads) +
                    " kv_heads=" + std::to_string(config.n_kv_heads) +
                    " query_tokens=" + std::to_string(options.query_tokens) +
                    " chunk=" + std::to_string(options.fixed_chunk_positions) +
                    " window=" + std::to_string(options.sliding_window) + " pos=";
    for (auto p : positions) s += std::to_string(p) + ",";
    return s;
  }
};

// Runs of `tokens` rows starting at each of `starts`, one slot per run (in reverse).
void add_runs(RunsCase& c, const std::vector<std::int32_t>& starts) {
  for (std::size_t r = 0; r < starts.size(); ++r) {
    for (int t = 0; t < c.options.query_tokens; ++t) {
      c.slots.push_back(static_cast<std::int32_t>(starts.size() - 1 - r));
      c.positions.push_back(starts[r] + t);
    }
  }
  c.config.slots = static_cast<std::int64_t>(starts.size());
}

// Cases over formats, head dims, GQA groups, masks, chunk sizes and run lengths. Linear caches
// hold a run that straddles the automatic chunk size's first doubling (rows that see 8192 and
// 8193 positions: C = 512 and 1024, served apart); ring caches a run that straddles the wrap.
std::vector<RunsCase> runs_cases() {
  std::mt19937 design(20261203);
  const auto pick = [&](const auto& values) { return values[design() % std::size(values)]; };
  const RowFormat k_formats[] = {RowFormat::f16, RowFormat::fp8, RowFormat::tq4, RowFormat::tq8};
  std::vector<RunsCase> cases;
  for (RowFormat k : k_formats) {
    for (MaskKind mask : {MaskKind::causal, MaskKind::sliding_linear, MaskKind::sliding_ring}) {
      RunsCase c;
      const bool ring = mask == MaskKind::sliding_ring;
      c.config.n_kv_heads = pick(std::array{1, 2});
      c.config.capacity = ring ? 300 : 8300;
      c.config.head_dim = pick(std::array{256, 512});
      c.config.kind = ring ? LayerKind::ring : LayerKind::linear;
      c.config.k_format = k;
      c.config.v_format =
          pick(std::array{RowFormat::f16, RowFormat::fp8, RowFormat::tq3, RowFormat::tq4,
                          RowFormat::tq5, RowFormat::tq6, RowFormat::tq8});
      c.options.n_heads = pick(std::array{1, 2, 4, 8}) * c.config.n_kv_heads;
      c.options.mask = mask;
      c.options.query_tokens = pick(std::array{2, 3, 5, 8});
      c.options.fixed_chunk_positions = pick(std::array<std::int64_t, 3>{0, 32, 64});
      c.options.sliding_window = mask == MaskKind::causal ? 0 : pick(std::array{37, 200});
      c.options.softcap = design() % 2 ? 3.0f : 0.0f;
      const std::int32_t straddle = ring ? 296 : 8190;
      add_runs(c, {0, straddle, pick(std::array{40, 100, 250})});
      cases.push_back(c);
    }
  }
  return cases;
}

// The outputs and lse of every row run alone (query_tokens 1, a batch of one).
struct AloneRows {
  std::vector<std::vector<float>> out, lse;
};

AloneRows run_alone(const KvCacheView& cache, const DecodeOptions& options, const DecodeCall& batch,
                    const std::vector<std::int32_t>& slots,
                    const std::vector<std::int32_t>& positions) {
  DecodeOptions single = options;
  single.query_tokens = 1;
  const DecodePlan plan = plan_decode(cache.config, single, 1);
  AloneRows rows;
  for (std::int64_t i = 0; i < batch.n; ++i) {
    DecodeCall alone(plan, {slots[i]}, {positions[i]}, 0);
    alone.set_query(0, batch.q_values.data() + i * batch.heads * batch.dim);
    alone.run_with_lse(plan, cache);
    rows.out.push_back(alone.output(0));
    rows.lse.push_back(alone.lse_values(0));
  }
  return rows;
}

// Runs a case as one batch and each of its rows alone; both bitwise equal.
void expect_rows_as_alone(const RunsCase& c) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(c.describe() + " seed=" + std::to_string(seed));
  KvCache cache(c.config);
  fill_random(cache.view(), seed);
  const auto n = static_cast<std::int64_t>(c.slots.size());
  const DecodePlan plan = plan_decode(c.config, c.options, n);
  const DecodeCall batch(plan, c.slots, c.positions, seed + 1);
  batch.run_with_lse(plan, cache.view());
  const AloneRows alone = run_alone(cache.view(), c.options, batch, c.slots, c.positions);
  for (std::int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    EXPECT_EQ(batch.output(i), alone.out[static_cast<std::size_t>(i)]);
    EXPECT_EQ(batch.lse_values(i), alone.lse[static_cast<std::size_t>(i)]);
  }
}

TEST(DecodeRuns, EachRowIsBitwiseTheRowAlone) {
  for (const RunsCase& c : runs_cases()) expect_rows_as_alone(c);
}

// Every SIMD target the CPU has (the block shapes, and so the reduction orders, change with
// the vector width), every third case.
TEST(DecodeRuns, EachRowIsBitwiseTheRowAloneOnEverySimdTarget) {
  const std::vector<RunsCase> cases = runs_cases();
  testing::for_each_simd_target([&] {
    for (std::size_t i = 0; i < cases.size(); i += 3) expect_rows_as_alone(cases[i]);
  });
}

// A NaN in the V row of a draft's last token reaches only the row that sees it: the earlier
// rows of its run skip that position rather than weigh it by 0. GQA groups of 1 and 2 put the
// four rows' heads in one accumulation block (of four, and of eight).
TEST(DecodeRuns, NanSeenOnlyByLaterRowsLeavesEarlierRowsAlone) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  constexpr std::int32_t kLast = 40;
  const std::vector<std::int32_t> slots = {0, 0, 0, 0};
  const std::vector<std::int32_t> positions = {kLast - 3, kLast - 2, kLast - 1, kLast};
  for (RowFormat v_format : {RowFormat::f16, RowFormat::fp8}) {
    for (int n_heads : {1, 2}) {
      SCOPED_TRACE(std::string(format_name(v_format)) + " heads=" + std::to_string(n_heads));
      const KvCacheConfig config{1,        1,    100,        256, LayerKind::linear, RowFormat::f16,
                                 v_format, 1.0f, Device::cpu};
      KvCache cache(config);
      fill_random(cache.view(), seed);
      auto* v_row = static_cast<std::uint8_t*>(cache.view().v.data) +
                    kLast * cache.view().v.strides[2] * dtype_bytes(cache.view().v.dtype);
      if (v_format == RowFormat::f16) {
        reinterpret_cast<std::uint16_t*>(v_row)[5] = 0x7e00;  // f16 NaN
      } else {
        v_row[5] = 0x7f;  // E4M3 NaN
      }
      DecodeOptions options;
      options.n_heads = n_heads;
      options.query_tokens = 4;
      const DecodePlan plan = plan_decode(config, options, 4);
      const DecodeCall run(plan, slots, positions, seed + 1);
      run.run(plan, cache.view());
      const AloneRows alone = run_alone(cache.view(), options, run, slots, positions);
      for (std::int64_t i = 0; i < 3; ++i) {
        EXPECT_EQ(run.output(i), alone.out[static_cast<std::size_t>(i)]) << "row " << i;
        for (float x : run.output(i)) ASSERT_TRUE(std::isfinite(x)) << "row " << i;
      }
      EXPECT_TRUE(std::isnan(run.output(3)[5]));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The thread count: the test runs itself in child processes with TURBODECODE_THREADS set, each
// of which computes the same problem (same seed) and writes its output bytes to a file.

const char* const kChildOutput = "TD_RUNS_CHILD_OUTPUT";

// The problem both sides compute: runs and lone rows of mixed lengths, more work items than
// threads.
std::vector<float> thread_problem_output(std::uint64_t seed) {
  const KvCacheConfig config{
      3, 2, 6000, 256, LayerKind::linear, RowFormat::tq8, RowFormat::tq4, 1.0f, Device::cpu};
  KvCache cache(config);
  fill_random(cache.view(), seed);
  DecodeOptions options;
  options.n_heads = 8;
  options.query_tokens = 3;
  const DecodePlan plan = plan_decode(config, options, 9);
  const DecodeCall call(plan, {2, 2, 2, 0, 0, 0, 1, 1, 1},
                        {5000, 5001, 5002, 10, 11, 12, 700, 701, 702}, seed + 1);
  call.run_with_lse(plan, cache.view());
  std::vector<float> values;
  for (std::int64_t i = 0; i < call.n; ++i) {
    const std::vector<float> out = call.output(i), lse = call.lse_values(i);
    values.insert(values.end(), out.begin(), out.end());
    values.insert(values.end(), lse.begin(), lse.end());
  }
  return values;
}

TEST(DecodeRunsChild, WritesOutput) {
  const char* path = std::getenv(kChildOutput);
  if (path == nullptr) GTEST_SKIP() << "runs only as the child of IndependentOfThreadCount";
  const std::vector<float> values = thread_problem_output(fresh_seed());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(float)));
}

// Runs this test binary again with `filter` and the extra environment variables, its standard
// output discarded (the child's report would read like this test's own); the exit status.
int run_self(const std::string& filter, std::vector<std::string> env_strings) {
  std::vector<char*> env;
  for (std::string& s : env_strings) env.push_back(s.data());
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter_arg = "--gtest_filter=" + filter;
  char* argv[] = {exe.data(), filter_arg.data(), nullptr};
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, exe.c_str(), &quiet, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&quiet);
  if (spawned != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<float> child_output(int threads, std::uint64_t seed) {
  const std::string path = ::testing::TempDir() + "runs_child_" + std::to_string(threads);
  std::remove(path.c_str());  // no output left from an earlier run can pass for this one's
  const int status = run_self("DecodeRunsChild.WritesOutput",
                              {"TURBODECODE_THREADS=" + std::to_string(threads),
                               "TD_TEST_SEED=" + std::to_string(seed),
                               std::string(kChildOutput) + "=" + path});
  EXPECT_EQ(status, 0) << "child with " << threads;
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return {};
  std::vector<float> values(static_cast<std::size_t>(file.tellg()) / sizeof(float));
  file.seekg(0);
  file.read(reinterpret_cast<char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  return values;
}

TEST(DecodeRuns, IndependentOfThreadCount) {
  // Under a user-mode emulator without binfmt_misc (the aarch64 tests under qemu-user) the
  // binary cannot start a copy of itself: a child that runs no test must exit 0 first.
  if (run_self("NoTestHasThisName", {}) != 0) {
    GTEST_SKIP() << "this process cannot run a copy of itself here";
  }
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const std::vector<float> here = thread_problem_output(seed);
  for (int threads : {1, 3, 7}) {
    EXPECT_EQ(child_output(threads, seed), here) << threads << " threads";
  }
}

// ---------------------------------------------------------------------------------------------
// lse merge (SPEC §2.9): a row's positions cut in two disjoint sets, [0, s) (the row at s − 1,
// causal) and [s, p] (the row at p, a sliding window of p − s + 1), attended apart and merged
// by their lse, equal attention over the union within rounding.

TEST(DecodeLse, MergingDisjointPositionSetsGivesTheUnion) {
  struct Split {
    RowFormat k, v;
    int head_dim;
    std::int32_t s, p;
  };
  const Split splits[] = {{RowFormat::f16, RowFormat::tq8, 256, 1000, 2999},
                          {RowFormat::tq8, RowFormat::f16, 512, 1, 700},
                          {RowFormat::fp8, RowFormat::tq3, 256, 2047, 2048},
                          {RowFormat::tq4, RowFormat::fp8, 512, 300, 4000}};
  for (const Split& split : splits) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(format_name(split.k)) + "/" + format_name(split.v) +
                 " s=" + std::to_string(split.s) + " p=" + std::to_string(split.p) +
                 " seed=" + std::to_string(seed));
    const KvCacheConfig config{1,       2,       4096, split.head_dim, LayerKind::linear,
                               split.k, split.v, 1.0f, Device::cpu};
    KvCache cache(config);
    fill_random(cache.view(), seed);
    DecodeOptions whole;
    whole.n_heads = 4;
    DecodeOptions tail = whole;
    tail.mask = MaskKind::sliding_linear;
    tail.sliding_window = split.p - split.s + 1;
    const DecodePlan whole_plan = plan_decode(config, whole, 1);
    const DecodePlan tail_plan = plan_decode(config, tail, 1);
    DecodeCall all(whole_plan, {0}, {split.p}, seed + 1);
    DecodeCall head(whole_plan, {0}, {split.s - 1}, seed + 1);
    DecodeCall rest(tail_plan, {0}, {split.p}, seed + 1);
    for (DecodeCall* call : {&all, &head}) call->run_with_lse(whole_plan, cache.view());
    rest.run_with_lse(tail_plan, cache.view());
    const std::int64_t dim = config.head_dim;
    std::vector<double> merged;
    std::vector<float> merged_lse;
    for (std::int64_t h = 0; h < whole.n_heads; ++h) {
      const double a = head.lse_values(0)[static_cast<std::size_t>(h)];
      const double b = rest.lse_values(0)[static_cast<std::size_t>(h)];
      const double m = std::max(a, b), wa = std::exp(a - m), wb = std::exp(b - m);
      for (std::int64_t j = 0; j < dim; ++j) {
        const auto at = static_cast<std::size_t>(h * dim + j);
        merged.push_back((wa * head.output(0)[at] + wb * rest.output(0)[at]) / (wa + wb));
      }
      merged_lse.push_back(static_cast<float>(m + std::log(wa + wb)));
    }
    EXPECT_LE(testing::relative_l2(all.output(0), merged), 1e-5);
    for (std::int64_t h = 0; h < whole.n_heads; ++h) {
      EXPECT_NEAR(all.lse_values(0)[static_cast<std::size_t>(h)],
                  merged_lse[static_cast<std::size_t>(h)], 1e-4);
    }
  }
}

}  // namespace
}  // namespace turbodecode
