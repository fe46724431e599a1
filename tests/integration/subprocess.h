// Runs a program as a child process with extra environment variables and captures its output,
// for tests that compare a job's behaviour with and without the preloaded shim.
#ifndef SPILLWAY_TESTS_INTEGRATION_SUBPROCESS_H_
#define SPILLWAY_TESTS_INTEGRATION_SUBPROCESS_H_

#include <map>
#include <string>
#include <vector>

namespace spillway::testing {

struct ProcessResult {
  int exit_code = -1;  // the exit status, or 128 + signal number when killed by a signal
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] (a path) with `env` added to (and overriding) this process's environment.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env);

// Reads a whole file; empty when it cannot be read.
std::string ReadFile(const std::string& path);

// The integer after `"key":` in `json` (an exit summary or simgpu's stats), at its first
// occurrence after `"from"` when `from` is not empty; -1 when there is none.
long long JsonInt(const std::string& json, const std::string& key, const std::string& from = "");

// The integer after the first "key=" in a program's output (a test program's facts), or -1.
long long Fact(const std::string& output, const std::string& key);

}  // namespace spillway::testing

#endif  // SPILLWAY_TESTS_INTEGRATION_SUBPROCESS_H_
