// Runs the built `turbodecode` binary in a scratch directory, for the CLI tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.h"

namespace turbodecode::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// The CLI sits in the build tree's root, one level above the test executables.
inline std::filesystem::path cli_path() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() /
         "turbodecode";
}

class CliFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(cli_path())) GTEST_SKIP() << "CLI not built at " << cli_path();
    seed_ = fresh_seed();
    dir_ =
        std::filesystem::temp_directory_path() / ("turbodecode_cli_test_" + std::to_string(seed_));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Runs `turbodecode <arguments>` (a shell command line) in the scratch directory.
  CommandResult run(const std::string& arguments) const {
    const std::filesystem::path err_file = dir_ / "stderr.txt";
    const std::string command = "cd " + dir_.string() + " && " + cli_path().string() + " " +
                                arguments + " 2>" + err_file.string();
    CommandResult result;
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return result;
    char chunk[4096];
    for (std::size_t n; (n = fread(chunk, 1, sizeof chunk, pipe)) > 0;) result.out.append(chunk, n);
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    FILE* err = std::fopen(err_file.c_str(), "r");
    for (std::size_t n; err && (n = fread(chunk, 1, sizeof chunk, err)) > 0;)
      result.err.append(chunk, n);
    if (err) std::fclose(err);
    return result;
  }

  static nlohmann::json parse_json(const CommandResult& result) {
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return nlohmann::json::parse(result.out);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::uint64_t seed_ = 0;
  std::filesystem::path dir_;
};

}  // namespace turbodecode::testing
