// The job under spillway-wait: signals forwarded, progress ticks, how it ended.
#include "launcher/job_runner.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "launcher/output.h"
#include "launcher/process.h"
#include "launcher/progress.h"

namespace spillway::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// The signals the launcher passes on to the job: every signal whose default action ends a process
// and that is sent, not caused (spillway-wait has the same list), the real-time ones but the last,
// which spillway-wait gets when the launcher dies. One ignored when the launcher started is left
// ignored, as a shell's trap leaves it.
sigset_t ForwardedSignals() {
  sigset_t set;
  sigemptyset(&set);
  std::vector<int> numbers = {SIGTERM,   SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM,
                              SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGPWR,  SIGIO,   SIGSYS};
  for (int number = SIGRTMIN; number < SIGRTMAX; ++number) numbers.push_back(number);
  for (int number : numbers) {
    struct sigaction action {};
    if (sigaction(number, nullptr, &action) == 0 && action.sa_handler == SIG_IGN) continue;
    sigaddset(&set, number);
  }
  return set;
}

// Starts spillway-wait for CALL; -1 when fork fails.
pid_t StartWaiter(const WaiterCall& call) {
  std::vector<std::string> argv = {
      call.waiter, "--status",   call.status_file, "--parent",        absl::StrCat(getpid()),
      "--preload", call.preload, "--command",      call.command_name, "--"};
  argv.insert(argv.end(), call.job.begin(), call.job.end());
  const pid_t child = fork();
  if (child != 0) return child;
  RestoreSignalsForExec();
  std::vector<char*> pointers;
  for (std::string& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  execv(pointers[0], pointers.data());
  _exit(127);
}

// Drops the forwarded signals still pending once the job is gone (a shell's trap would have sent
// them to a child no longer there).
void DropPending(const sigset_t& set) {
  const timespec now = {0, 0};
  while (sigtimedwait(&set, nullptr, &now) > 0) {
  }
}

}  // namespace

std::optional<JobEnd> ParseJobEnd(const std::string& text) {
  absl::string_view rest = text;
  while (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  JobEnd end;
  if (absl::ConsumePrefix(&rest, "signal ")) {
    end.signaled = true;
  } else if (!absl::ConsumePrefix(&rest, "exit ")) {
    return std::nullopt;
  }
  if (rest.empty() || rest.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(rest, &end.number)) {
    return std::nullopt;
  }
  return end;
}

std::string SignalName(int number) {
  if (number == SIGRTMIN) return "RTMIN";
  if (number == SIGRTMAX) return "RTMAX";
  if (number > SIGRTMIN && number < SIGRTMAX) {
    if (number - SIGRTMIN <= (SIGRTMAX - SIGRTMIN) / 2) {
      return absl::StrCat("RTMIN+", number - SIGRTMIN);
    }
    return absl::StrCat("RTMAX-", SIGRTMAX - number);
  }
  const char* name = number > 0 && number < SIGRTMIN ? sigabbrev_np(number) : nullptr;
  return name == nullptr ? "?" : name;
}

bool Scratch::Make() {
  std::vector<std::string> bases;
  if (const char* tmpdir = std::getenv("TMPDIR"); tmpdir != nullptr && tmpdir[0] != '\0') {
    bases.push_back(tmpdir);
  }
  bases.push_back("/tmp");
  for (const std::string& base : bases) {
    std::string name = base + "/spillway-run.XXXXXX";
    if (mkdtemp(name.data()) != nullptr) {
      path_ = name;
      return true;
    }
  }
  return false;
}

void Scratch::Remove() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
  path_.clear();
}

JobEnd RunUnderWaiter(const WaiterCall& call) {
  // The signals are blocked before the job starts, so one that arrives while it is being started
  // is kept and sent right after, not lost (or fatal to the launcher).
  const sigset_t forwarded = ForwardedSignals();
  sigset_t waited = forwarded;
  sigaddset(&waited, SIGCHLD);
  sigset_t before;
  sigprocmask(SIG_BLOCK, &waited, &before);
  const pid_t child = StartWaiter(call);
  int status = 0;
  const auto start = Clock::now();
  auto next_tick = start + std::chrono::seconds(2);
  while (child > 0) {
    int reaped = waitpid(child, &status, WNOHANG);
    if (reaped == child || (reaped < 0 && errno != EINTR)) break;
    int number;
    if (call.progress_list.empty()) {
      number = sigwaitinfo(&waited, nullptr);
    } else {
      const auto left = std::max(next_tick - Clock::now(), Clock::duration::zero());
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(left);
      const timespec timeout = {
          static_cast<time_t>(seconds.count()),
          static_cast<long>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(left - seconds).count())};
      number = sigtimedwait(&waited, nullptr, &timeout);
      if (number < 0 && errno == EAGAIN) {
        PrintProgress(
            call.progress_list,
            std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count());
        next_tick += std::chrono::seconds(2);
        continue;
      }
    }
    if (number > 0 && number != SIGCHLD) kill(child, number);
  }
  DropPending(waited);
  sigprocmask(SIG_SETMASK, &before, nullptr);
  if (!call.progress_list.empty()) ClearProgress();

  // What spillway-wait wrote; else (killed before it started the job, or while it ran: the job
  // dies with it) its own status.
  std::ifstream in(call.status_file);
  std::string line;
  std::getline(in, line);
  if (std::optional<JobEnd> end = ParseJobEnd(line)) return *end;
  int code = 127;
  if (child > 0) code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  if (code <= 128) return JobEnd{false, code};
  const int number = code - 128;
  Say(absl::StrCat("spillway: spillway-wait, the job's parent, was killed by signal ", number,
                   " (SIG", SignalName(number),
                   "); the job, if it had started, was killed with it"));
  return JobEnd{true, number};
}

void ExitLikeJob(JobEnd end) {
  if (!end.signaled) std::exit(end.number);
  const rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(end.number, &default_action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, end.number);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(end.number);
  std::exit(128 + end.number);
}

}  // namespace spillway::launcher
