// spillway-wait: the parent `spillway run` puts between itself and the job. It starts the job,
// writes how it ended ("exit N" or "signal N") for the launcher, and hands the job each signal the
// launcher forwards, once (a copy the whole job got already is not passed on again). With
// --raise N it ends itself by signal N, as the launcher (launcher/job_runner.cc) ends itself like a
// job that a signal killed.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::job_waiter {
namespace {

using Clock = std::chrono::steady_clock;

// The signals the launcher traps and hands on (launcher/job_runner.cc has the same list): every
// signal whose default action ends a process and that is sent, not caused, and the real-time ones
// but the last, which is LauncherGone().
constexpr int kForwardedNamed[] = {SIGTERM,   SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM,
                                   SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGPWR,  SIGIO,   SIGSYS};
std::vector<int> ForwardedSignals() {
  std::vector<int> signals(std::begin(kForwardedNamed), std::end(kForwardedNamed));
  for (int number = SIGRTMIN; number < SIGRTMAX; ++number) signals.push_back(number);
  return signals;
}

// What this process gets when the launcher dies (PR_SET_PDEATHSIG): the launcher was killed by a
// signal it cannot trap (SIGKILL: torchrun, Popen.kill, a scheduler's last resort), and the job
// is killed as it would have been without the launcher between. The same signal sent by anyone
// while the launcher lives is not that, and is dropped (the job got its own copy if it was sent
// to the job's process group).
int LauncherGone() { return SIGRTMAX; }

// A signal sent to the whole job (to its process group: Ctrl-C on the terminal, `kill -- -PGID`;
// or to each of its processes: scancel, systemd) reaches the launcher, this process and the job
// alike; the job must not get it a second time from the launcher. The launcher's copy arrives here
// from the launcher's pid, the group's copy from anyone else. Each group copy cancels one forward
// of the same signal from the launcher that comes within kOwedFor (the launcher forwards what it
// got, a shell trap's delay later); a forward with no group copy yet waits kGroupCopyWait for one
// before it goes to the job.
// Two limits: a standard signal does not queue, so a launcher's forward that arrives while the
// group copy of the same signal is still unread here merges into it, and the owed entry then
// cancels a launcher-only signal of that number within kOwedFor (unread for microseconds at most,
// against a shell trap's milliseconds); and a forward later than kOwedFor reaches the job twice.
constexpr auto kOwedFor = std::chrono::seconds(1);
constexpr auto kGroupCopyWait = std::chrono::milliseconds(100);

struct Options {
  const char* status_path = nullptr;
  pid_t parent = 0;  // --parent: the launcher's pid; 0: whatever getppid() says at the start
  const char* preload = nullptr;
  const char* command_name = "run";
  char** job = nullptr;
};

// A forward the launcher asked for that waits for the group's copy of the same signal.
struct Forward {
  int number;
  Clock::time_point due;
};

// Decides which of the signals that reach this process go on to the job, and when (above).
class SignalRelay {
 public:
  SignalRelay(pid_t launcher, pid_t job) : launcher_(launcher), job_(job) {}

  // Takes one signal that reached this process.
  void Take(const signalfd_siginfo& info, Clock::time_point now) {
    const int number = static_cast<int>(info.ssi_signo);
    const bool from_launcher = info.ssi_code <= 0 && static_cast<pid_t>(info.ssi_pid) == launcher_;
    if (from_launcher) {
      std::deque<Clock::time_point>& owed = owed_[number];
      while (!owed.empty() && now - owed.front() > kOwedFor) owed.pop_front();
      if (!owed.empty()) {
        owed.pop_front();  // the job got this one from the group
        return;
      }
      waiting_.push_back({number, now + kGroupCopyWait});
      return;
    }
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      if (it->number == number) {
        waiting_.erase(it);  // the launcher's forward of this very signal
        return;
      }
    }
    owed_[number].push_back(now);
  }

  // Hands the job the forwards whose wait is over.
  void SendDue(Clock::time_point now) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->due <= now) {
        kill(job_, it->number);
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Milliseconds until the next forward is due (rounded up), or -1 when none waits.
  int PollTimeout(Clock::time_point now) const {
    if (waiting_.empty()) return -1;
    Clock::time_point first = waiting_.front().due;
    for (const Forward& forward : waiting_) first = std::min(first, forward.due);
    if (first <= now) return 0;
    return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(first - now).count());
  }

 private:
  pid_t launcher_;
  pid_t job_;
  std::vector<Forward> waiting_;
  std::map<int, std::deque<Clock::time_point>> owed_;
};

// Writes "exit N" or "signal N" to `path`; false when it cannot.
bool WriteStatus(const char* path, int status) {
  FILE* file = std::fopen(path, "w");
  if (file == nullptr) return false;
  if (WIFSIGNALED(status)) {
    std::fprintf(file, "signal %d\n", WTERMSIG(status));
  } else {
    std::fprintf(file, "exit %d\n", WEXITSTATUS(status));
  }
  return std::fclose(file) == 0;
}

// In the forked child (`waiter`: this process's parent, 0 when the job runs in its place): the
// signal mask and dispositions the launcher gave this process, the preload, then the job. A job
// under a waiter dies with it: a waiter killed outright (SIGKILL, the OOM killer) leaves nobody
// to report how the job ends, and the launcher ends as if the job had been killed, which it then
// was, instead of leaving it running unwatched.
[[noreturn]] void ExecJob(const Options& options, const sigset_t& original_mask,
                          const struct sigaction& original_child_action, pid_t waiter) {
  if (waiter != 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != waiter)) {
    raise(SIGKILL);  // the waiter is gone already (or cannot be followed): no job without it
  }
  sigaction(SIGCHLD, &original_child_action, nullptr);
  sigprocmask(SIG_SETMASK, &original_mask, nullptr);
  if (options.preload != nullptr) setenv("LD_PRELOAD", options.preload, 1);
  execvp(options.job[0], options.job);
  const int error = errno;
  std::fprintf(stderr, "spillway: %s: cannot run '%s': %s\n", options.command_name, options.job[0],
               std::strerror(error));
  _exit(error == ENOENT ? 127 : 126);
}

// Runs the job to its end; the exit status is the job's (128 + N for a signal) in case the
// status file cannot be written.
int Run(const Options& options) {
  sigset_t handled;
  sigemptyset(&handled);
  for (int number : ForwardedSignals()) {
    struct sigaction action {};
    sigaction(number, nullptr, &action);
    // A signal the launcher started with ignored stays ignored, as the job inherits it.
    if (action.sa_handler != SIG_IGN) sigaddset(&handled, number);
  }
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, LauncherGone());
  sigset_t original_mask;
  sigprocmask(SIG_BLOCK, &handled, &original_mask);
  // An ignored SIGCHLD would reap the job before it could be waited for.
  struct sigaction default_action {};
  struct sigaction original_child_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &default_action, &original_child_action);
  // Without a way to watch the job, it still runs: in this process's place (the launcher then
  // sees it end as bash's `wait` can tell).
  const int signals = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  const pid_t launcher = options.parent != 0 ? options.parent : getppid();
  // A launcher gone already (killed while it started this, before or after the death signal was
  // set) leaves no job behind.
  if (signals >= 0 && prctl(PR_SET_PDEATHSIG, LauncherGone()) == 0 && getppid() != launcher) {
    return 128 + SIGKILL;
  }
  const pid_t waiter = getpid();
  const pid_t job = signals >= 0 ? fork() : -1;
  if (job < 0) {
    std::fprintf(stderr, "spillway: %s: cannot watch the job (%s): it runs unwatched\n",
                 options.command_name, std::strerror(errno));
    ExecJob(options, original_mask, original_child_action, 0);
  }
  if (job == 0) ExecJob(options, original_mask, original_child_action, waiter);

  SignalRelay relay(launcher, job);
  while (true) {
    int status = 0;
    const pid_t done = waitpid(job, &status, WNOHANG);
    if (done == job) {
      WriteStatus(options.status_path, status);
      return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
    if (done < 0 && errno != EINTR) return 1;
    pollfd ready = {signals, POLLIN, 0};
    poll(&ready, 1, relay.PollTimeout(Clock::now()));
    signalfd_siginfo info;
    while (read(signals, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      const int number = static_cast<int>(info.ssi_signo);
      if (number == LauncherGone()) {
        if (getppid() != launcher) kill(job, SIGKILL);
      } else if (number != SIGCHLD) {
        relay.Take(info, Clock::now());
      }
    }
    relay.SendDue(Clock::now());
  }
}

// --raise N: ends this process by signal N with its default action and no core dump; returns
// 128 + N should the signal not end it.
int Raise(int number) {
  const rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(number, &default_action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, number);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(number);
  return 128 + number;
}

constexpr const char* kUsage =
    "usage: spillway-wait --status FILE [--parent PID] [--preload LIST] [--command NAME]\n"
    "                     -- COMMAND [ARGS...]\n"
    "       spillway-wait --raise SIGNAL\n"
    "Runs COMMAND as a child (with LD_PRELOAD=LIST), hands it the signals the parent sends once\n"
    "unless it got them too, and writes \"exit N\" or \"signal N\" to FILE when it ends; it kills\n"
    "COMMAND when the parent (PID, if given) dies. --raise ends this process by SIGNAL. Used by\n"
    "the `spillway` launcher.\n";

int UsageError(const char* why) {
  std::fprintf(stderr, "spillway-wait: %s\n%s", why, kUsage);
  return 2;
}

}  // namespace
}  // namespace spillway::job_waiter

int main(int argc, char** argv) {
  using namespace spillway::job_waiter;
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--raise" && has_value) {
      const int number = std::atoi(argv[i + 1]);
      if (number <= 0 || number >= NSIG) return UsageError("bad --raise");
      return Raise(number);
    }
    if (arg == "--status" && has_value) {
      options.status_path = argv[++i];
    } else if (arg == "--parent" && has_value) {
      const long parent = std::strtol(argv[++i], nullptr, 10);
      if (parent <= 1 || parent > INT32_MAX) return UsageError("bad --parent");
      options.parent = static_cast<pid_t>(parent);
    } else if (arg == "--preload" && has_value) {
      options.preload = argv[++i];
    } else if (arg == "--command" && has_value) {
      options.command_name = argv[++i];
    } else if (arg == "--") {
      if (i + 1 < argc) options.job = argv + i + 1;
      break;
    } else {
      return UsageError(("unknown option '" + std::string(arg) + "'").c_str());
    }
  }
  if (options.status_path == nullptr || options.job == nullptr) {
    return UsageError("needs --status FILE and a command");
  }
  return Run(options);
}
