#include "progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace turbodecode::cli {
namespace {

constexpr int kBarWidth = 30;
constexpr int kLineWidth = 79;

}  // namespace

ProgressBar::ProgressBar(std::int64_t total, bool enabled)
    : total_(std::max<std::int64_t>(total, 1)), enabled_(enabled && isatty(STDERR_FILENO)) {}

ProgressBar::~ProgressBar() {
  if (enabled_) std::fprintf(stderr, "\r%*s\r", kLineWidth, "");  // leave a clean line
}

void ProgressBar::advance(std::int64_t units, const std::string& stage) {
  done_ = std::min(done_ + units, total_);
  if (enabled_) draw(stage);
}

void ProgressBar::draw(const std::string& stage) {
  const double fraction = static_cast<double>(done_) / static_cast<double>(total_);
  const int filled = static_cast<int>(fraction * kBarWidth);
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  char line[256];
  std::snprintf(line, sizeof line, "[%s] %3d%% %5.1fs %s", bar.c_str(),
                static_cast<int>(fraction * 100.0), elapsed_s, stage.c_str());
  std::fprintf(stderr, "\r%-*.*s", kLineWidth, kLineWidth, line);
  std::fflush(stderr);
}

}  // namespace turbodecode::cli
