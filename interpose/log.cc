// Log lines into a stack buffer and out with one write(2), so lines from threads never interleave.
#include "interpose/log.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace spillway::interpose {
namespace {

constinit std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};

// Problems kept for the summary: fixed slots, lock-free append.
constexpr int kMaxProblems = 32;
struct ProblemSlot {
  std::atomic<bool> ready{false};
  char text[256] = {};
};
constinit ProblemSlot g_problems[kMaxProblems];
constinit std::atomic<int> g_problem_count{0};
constinit std::atomic<int> g_fd{STDERR_FILENO};

const char* LevelWord(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error: ";
    case LogLevel::kWarn:
      return "warning: ";
    case LogLevel::kInfo:
      return "";
    case LogLevel::kDebug:
      return "debug: ";
  }
  return "";
}

}  // namespace

void SetLogSink(LogLevel level, int fd) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
  g_fd.store(fd, std::memory_order_relaxed);
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

void Log(LogLevel level, const char* format, ...) {
  if (!LogEnabled(level)) return;
  char line[1024];
  int used = std::snprintf(line, sizeof(line), "spillway: %s", LevelWord(level));
  if (used < 0) return;
  va_list args;
  va_start(args, format);
  const int body = std::vsnprintf(line + used, sizeof(line) - used - 1, format, args);
  va_end(args);
  if (body > 0) used += body;
  if (used > static_cast<int>(sizeof(line)) - 2) used = sizeof(line) - 2;
  line[used++] = '\n';
  const int fd = g_fd.load(std::memory_order_relaxed);
  const char* p = line;
  while (used > 0) {
    const ssize_t n = ::write(fd, p, used);
    if (n <= 0) return;
    p += n;
    used -= static_cast<int>(n);
  }
}

void ReportProblem(LogLevel level, const char* format, ...) {
  char text[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  Log(level, "%s", text);
  const int slot = g_problem_count.fetch_add(1, std::memory_order_relaxed);
  if (slot >= kMaxProblems) return;
  std::snprintf(g_problems[slot].text, sizeof(g_problems[slot].text), "%s", text);
  g_problems[slot].ready.store(true, std::memory_order_release);
}

std::vector<std::string> KeptProblems() {
  std::vector<std::string> kept;
  const int count = g_problem_count.load(std::memory_order_relaxed);
  for (int i = 0; i < std::min(count, kMaxProblems); ++i) {
    if (g_problems[i].ready.load(std::memory_order_acquire)) kept.emplace_back(g_problems[i].text);
  }
  if (count > kMaxProblems) kept.emplace_back("(more problems were logged than the summary keeps)");
  return kept;
}

}  // namespace spillway::interpose
