// fork/exec helpers of the launcher.
#include "launcher/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "launcher/output.h"

namespace spillway::launcher {
namespace {

sigset_t start_mask;

std::vector<char*> Pointers(const std::vector<std::string>& argv) {
  std::vector<char*> pointers;
  for (const std::string& arg : argv) pointers.push_back(const_cast<char*>(arg.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

void SaveStartSignalMask() { sigprocmask(SIG_SETMASK, nullptr, &start_mask); }

void RestoreSignalsForExec() {
  signal(SIGPIPE, SIG_DFL);
  sigprocmask(SIG_SETMASK, &start_mask, nullptr);
}

std::optional<std::string> CaptureOutput(const std::vector<std::string>& argv,
                                         int timeout_seconds) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (child == 0) {
    RestoreSignalsForExec();
    dup2(fds[1], STDOUT_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO);
    std::vector<char*> pointers = Pointers(argv);
    execv(pointers[0], pointers.data());
    _exit(127);
  }
  close(fds[1]);
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  bool killed = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(child, SIGKILL);
      killed = true;
      break;
    }
    pollfd poll_fd = {fds[0], POLLIN, 0};
    const int ready = poll(&poll_fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t got = read(fds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    output.append(buffer, static_cast<size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!killed && WIFEXITED(status) && WEXITSTATUS(status) == 127 && output.empty()) {
    return std::nullopt;
  }
  return output;
}

void ExecOrExit(const std::vector<std::string>& argv, const std::string& what) {
  RestoreSignalsForExec();
  std::vector<char*> pointers = Pointers(argv);
  execvp(pointers[0], pointers.data());
  const int error = errno;
  Say(absl::StrCat("spillway: ", what, ": cannot run ", argv[0], ": ", std::strerror(error)));
  std::exit(error == ENOENT ? 127 : 126);
}

}  // namespace spillway::launcher
