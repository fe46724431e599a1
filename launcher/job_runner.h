// Running the job to its end under spillway-wait (interpose/job_waiter.cc, the job's parent, which
// tells "exit N" from "signal N" and hands the job each signal the launcher forwards once), with
// the launcher's scratch folder, and ending the launcher as the job ended.
#ifndef SPILLWAY_LAUNCHER_JOB_RUNNER_H_
#define SPILLWAY_LAUNCHER_JOB_RUNNER_H_

#include <optional>
#include <string>
#include <vector>

namespace spillway::launcher {

// How the job ended: "exit N" or "signal N".
struct JobEnd {
  bool signaled = false;
  int number = 0;
};

// Reads "exit N" or "signal N" (spillway-wait's status file); nothing for anything else.
std::optional<JobEnd> ParseJobEnd(const std::string& text);

// A signal's name as `kill -l N` prints it ("KILL", "RTMIN+2"), "?" when it has none.
std::string SignalName(int number);

// The scratch folder of one run (the job's status, the trace list, the exit summaries when the
// user chose no path) in $TMPDIR, else in /tmp; removed when this object goes.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { Remove(); }
  // Makes the folder; false when neither place can hold one.
  bool Make();
  void Remove();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What RunUnderWaiter starts.
struct WaiterCall {
  std::string waiter;        // spillway-wait's path
  std::string status_file;   // where it writes how the job ended
  std::string preload;       // the job's LD_PRELOAD
  std::string command_name;  // "run" or "profile", for its messages
  std::vector<std::string> job;
  std::string progress_list;  // not empty: print the progress line for the traces listed there
};

// Runs the job under spillway-wait and waits for it; every signal of the forwarded list that
// reaches the launcher meanwhile goes to spillway-wait. When spillway-wait itself was killed, says
// so and returns its signal.
JobEnd RunUnderWaiter(const WaiterCall& call);

// Ends the launcher as the job ended: with its exit status, or by the same signal with its default
// action (no core dump of its own).
[[noreturn]] void ExitLikeJob(JobEnd end);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_JOB_RUNNER_H_
