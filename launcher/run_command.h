// What `spillway run` and `spillway profile` share: reading and checking the run options before
// anything starts, exporting the settings, and running the job to its end with the summary lines.
#ifndef SPILLWAY_LAUNCHER_RUN_COMMAND_H_
#define SPILLWAY_LAUNCHER_RUN_COMMAND_H_

#include <string>
#include <vector>

#include "launcher/job_runner.h"
#include "launcher/usage.h"

namespace spillway::launcher {

// The command being run, as PrepareRun left it.
struct PreparedRun {
  std::string command_name;  // "run" or "profile"
  std::string libdir;        // spillway's folder
  std::vector<std::string> job;
  std::string preload;  // the job's LD_PRELOAD
  bool quiet = false;
};

// Reads ARGS as `spillway run` options (USAGE's help on --help), checks them and the job's program
// before anything starts (exiting with the usage error or the check's status), and exports the
// settings into this process's environment.
PreparedRun PrepareRun(Command usage, const std::vector<std::string>& args,
                       const std::string& command_name);

// Replaces the launcher with the job: nothing of spillway's runs after it.
[[noreturn]] void ExecJob(const PreparedRun& run);

// Makes SCRATCH for running the job under spillway-wait; when that cannot be (spillway-wait
// missing, no folder for a scratch one), one line says so (plus NOTE) and the job runs in the
// launcher's place without the summary lines: spillway never keeps a job from running.
void PrepareScratch(const PreparedRun& run, Scratch& scratch, const std::string& note);

// Runs the job to its end and prints the summary lines (not with --quiet). Without a summary path
// of the user's, each process writes into SCRATCH; one of the user's counts when written after
// the start (with a second of slack for file systems with coarse timestamps).
JobEnd RunAndSummarize(const PreparedRun& run, const Scratch& scratch,
                       const std::string& progress_list);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_RUN_COMMAND_H_
