// Starting other programs from the launcher: a helper whose output is read (spillway-doctor
// --driver-version), and replacing the launcher with a program (the job, a tool).
#ifndef SPILLWAY_LAUNCHER_PROCESS_H_
#define SPILLWAY_LAUNCHER_PROCESS_H_

#include <optional>
#include <string>
#include <vector>

namespace spillway::launcher {

// Runs ARGV (its stderr to /dev/null) and returns its stdout, or nothing when it cannot start.
// It is killed after TIMEOUT_SECONDS (what it printed by then is returned).
std::optional<std::string> CaptureOutput(const std::vector<std::string>& argv, int timeout_seconds);

// Puts back in a child what the launcher changed for itself (SIGPIPE ignored, signals blocked
// while it waits for the job), so the program it starts gets what the launcher got.
void RestoreSignalsForExec();

// Records the signal mask the launcher started with (main calls it first).
void SaveStartSignalMask();

// Replaces the launcher with ARGV (PATH searched when its first word has no slash). When that
// fails, says why as "spillway: WHAT: ..." and exits 127 (not found) or 126, as a shell does.
[[noreturn]] void ExecOrExit(const std::vector<std::string>& argv, const std::string& what);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_PROCESS_H_
