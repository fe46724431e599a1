// The running program's folder (see program_dir.h).
#include "common/program_dir.h"

#include <unistd.h>

namespace spillway {

std::string ProgramDir() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  const std::string full(path, static_cast<size_t>(n));
  return full.substr(0, full.find_last_of('/'));
}

}  // namespace spillway
