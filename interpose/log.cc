// Log lines into a stack buffer and out with one write(2), so lines from threads never interleave.
#include "interpose/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace spillway::interpose {
namespace {

constinit std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
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

}  // namespace spillway::interpose
