// The command lines of `spillway run` and `spillway profile`: their options up to the job's
// command, and the checks that need nothing but the words (values out of their lists, a missing
// command). The parsing is by hand, not CLI11: it must stop at the job's first word (the job's own
// options are not the launcher's) and report errors in the bash launcher's words and order.
#ifndef SPILLWAY_LAUNCHER_RUN_OPTIONS_H_
#define SPILLWAY_LAUNCHER_RUN_OPTIONS_H_

#include <string>
#include <vector>

namespace spillway::launcher {

// What `spillway run` was told; empty strings are options not given.
struct RunOptions {
  std::string summary, mode, log, log_file, device_memory, host_memory, policy, eviction, headroom;
  bool ballast = false;
  bool keep_arenas = false;  // --framework-allocator
  bool quiet = false;
  bool simgpu = false;
  bool help = false;             // --help: print the usage, nothing else
  bool version = false;          // --version: print the version, nothing else
  std::vector<std::string> job;  // the command and its arguments
};

// RunOptions, or the usage error (error not empty).
struct RunParse {
  RunOptions options;
  std::string error;
};

// Reads ARGS (after `run`); COMMAND_NAME ("run", "profile") starts the error messages.
RunParse ParseRunOptions(const std::vector<std::string>& args, const std::string& command_name);

// What `spillway profile` was told: its own options, and the rest for ParseRunOptions
// ("--mode record" in front).
struct ProfileParse {
  std::string output = "spillway.trace";
  bool progress = false;  // --progress
  bool help = false;      // --help
  std::vector<std::string> run_args;
  std::string error;
};

// Reads ARGS (after `profile`).
ProfileParse ParseProfileOptions(const std::vector<std::string>& args);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_RUN_OPTIONS_H_
