// A one-line progress bar on stderr, redrawn in place with '\r'. Silent when stderr is not a
// terminal, so logs and pipes stay clean; stdout (and --json output) is never touched.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace turbodecode::cli {

class ProgressBar {
 public:
  // `total` units of work; `enabled` false silences the bar (e.g. for --json).
  ProgressBar(std::int64_t total, bool enabled);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Marks `units` more as done and shows `stage` as the current activity.
  void advance(std::int64_t units, const std::string& stage);

 private:
  void draw(const std::string& stage);

  std::int64_t total_;
  std::int64_t done_ = 0;
  bool enabled_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace turbodecode::cli
