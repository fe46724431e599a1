// The report tools' progress line on stderr.
#include "profiler/report/progress_line.h"

#include <unistd.h>

#include <cstdio>

namespace spillway::report {

ProgressLine::ProgressLine(std::string program)
    : program_(std::move(program)),
      enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() { Done(); }

void ProgressLine::Update(const std::string& phase, uint64_t done, uint64_t total) {
  if (!enabled_) return;
  if (!drawn_ && std::chrono::steady_clock::now() - start_ < std::chrono::milliseconds(500)) {
    return;
  }
  const int percent = total ? static_cast<int>(done * 100 / total) : -1;
  if (drawn_ && percent == last_percent_ && phase == last_phase_) return;
  last_percent_ = percent;
  last_phase_ = phase;
  drawn_ = true;
  if (percent >= 0) {
    std::fprintf(stderr, "\r%s: %s %3d%%\033[K", program_.c_str(), phase.c_str(), percent);
  } else {
    std::fprintf(stderr, "\r%s: %s\033[K", program_.c_str(), phase.c_str());
  }
  std::fflush(stderr);
}

void ProgressLine::Done() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace spillway::report
