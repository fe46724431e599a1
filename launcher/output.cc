// Writes to stderr and stdout that ignore every failure (closed, full or broken streams).
#include "launcher/output.h"

#include <errno.h>
#include <unistd.h>

#include <string>

namespace spillway::launcher {
namespace {

// write(2) until all of TEXT is out or the stream refuses; EINTR is retried, the rest dropped.
void WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text.remove_prefix(static_cast<size_t>(written));
  }
}

}  // namespace

void SayRaw(std::string_view text) { WriteAll(STDERR_FILENO, text); }

void Say(std::string_view line) {
  std::string text(line);
  text += '\n';
  WriteAll(STDERR_FILENO, text);
}

void Print(std::string_view text) { WriteAll(STDOUT_FILENO, text); }

}  // namespace spillway::launcher
