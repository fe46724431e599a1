// `spillway profile`'s progress line.
#include "launcher/progress.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "launcher/output.h"

namespace spillway::launcher {

std::string HumanDuration(int64_t seconds) {
  if (seconds >= 3600) return absl::StrFormat("%dh%02dm", seconds / 3600, seconds % 3600 / 60);
  if (seconds >= 60) return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  return absl::StrFormat("%ds", seconds);
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes >= 1000000000) {
    return absl::StrFormat("%d.%d GB", bytes / 1000000000, bytes % 1000000000 / 100000000);
  }
  if (bytes >= 1000000) return absl::StrFormat("%d MB", bytes / 1000000);
  if (bytes >= 1000) return absl::StrFormat("%d kB", bytes / 1000);
  return absl::StrFormat("%d B", bytes);
}

std::vector<std::string> FindTraces(const std::string& list) {
  std::vector<std::string> traces;
  std::ifstream in(list);
  std::string file;
  while (std::getline(in, file)) {
    struct stat info {};
    if (stat(file.c_str(), &info) == 0 && S_ISREG(info.st_mode)) traces.push_back(file);
  }
  return traces;
}

void PrintProgress(const std::string& list, int64_t elapsed_seconds) {
  uint64_t bytes = 0;
  for (const std::string& file : FindTraces(list)) {
    struct stat info {};
    if (stat(file.c_str(), &info) == 0) bytes += static_cast<uint64_t>(info.st_size);
  }
  const std::string line = absl::StrCat("spillway profile: ", HumanDuration(elapsed_seconds), ", ",
                                        HumanBytes(bytes), " recorded");
  if (isatty(STDERR_FILENO)) {
    SayRaw(absl::StrCat("\r", line, "\033[K"));
  } else {
    Say(line);
  }
}

void ClearProgress() {
  if (isatty(STDERR_FILENO)) SayRaw("\r\033[K");
}

}  // namespace spillway::launcher
