// `spillway profile`: `spillway run` in record mode, with the trace moved to -o when one process
// recorded (the traces listed when several did), and the progress line.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "launcher/commands.h"
#include "launcher/output.h"
#include "launcher/paths.h"
#include "launcher/progress.h"
#include "launcher/run_command.h"
#include "launcher/run_options.h"

namespace spillway::launcher {
namespace {

// The usage error for -o OUTPUT, or "" when the trace can go there.
std::string CheckOutput(const std::string& output) {
  if (output.empty()) return "profile: empty -o";
  struct stat info {};
  if (stat(output.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) {
      return absl::StrCat("profile: -o '", output, "' is a folder; name the trace file");
    }
    if (S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode)) {
      return absl::StrCat("profile: -o '", output,
                          "' is a FIFO or a socket; name a file (or a device such as /dev/null)");
    }
  }
  const std::string dir = Dirname(output);
  struct stat dir_info {};
  if (stat(dir.c_str(), &dir_info) != 0 || !S_ISDIR(dir_info.st_mode) ||
      access(dir.c_str(), W_OK) != 0) {
    return absl::StrCat("profile: cannot write into '", dir, "' for -o '", output, "'");
  }
  return "";
}

bool IsRegular(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// Copies FROM's bytes into TO (truncated, written through: a device stays a device).
void CopyInto(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
}

// Puts the one trace at TARGET: a link stays a link (its target gets the trace), a device is
// written through, never replaced; a regular file is replaced whole.
void MoveTrace(const std::string& trace, const std::string& target) {
  struct stat info {};
  const bool exists = stat(target.c_str(), &info) == 0;
  if ((exists && !S_ISREG(info.st_mode)) || std::rename(trace.c_str(), target.c_str()) != 0) {
    CopyInto(trace, target);
  }
  std::remove(trace.c_str());
}

}  // namespace

void ProfileCommand(const std::vector<std::string>& args) {
  const ProfileParse parse = ParseProfileOptions(args);
  ExitOnHelpOrVersion(parse.help, false, Command::kProfile);
  if (!parse.error.empty()) UsageError(parse.error, Command::kProfile);
  if (std::string error = CheckOutput(parse.output); !error.empty()) {
    UsageError(error, Command::kProfile);
  }
  // The job may change directory: the traces' path is absolute (messages name it as given).
  const std::string& output = parse.output;
  const std::string path = AbsolutePath(output);
  const bool per_pid = output.find("%p") != std::string::npos;
  const std::string pattern = path.find("%p") != std::string::npos ? path : path + ".%p";
  const PreparedRun run = PrepareRun(Command::kProfile, parse.run_args, "profile");
  setenv("SPILLWAY_TRACE", pattern.c_str(), 1);
  Scratch scratch;
  PrepareScratch(
      run, scratch,
      absl::StrCat(", its traces stay ", absl::StrReplaceAll(pattern, {{"%p", "<pid>"}})));
  const std::string list = scratch.path() + "/traces";
  setenv("SPILLWAY_TRACE_LIST", list.c_str(), 1);
  // -o as it is before the job: changed after it, another job wrote it meanwhile.
  const std::string before_job = FileIdentity(path);
  const bool progress = (parse.progress || isatty(STDERR_FILENO)) && !run.quiet;
  const JobEnd end = RunAndSummarize(run, scratch, progress ? list : "");
  const std::vector<std::string> traces = FindTraces(list);
  std::string target = path;
  struct stat link_info {};
  if (lstat(path.c_str(), &link_info) == 0 && S_ISLNK(link_info.st_mode)) {
    std::error_code error;
    const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, error);
    if (!error) target = resolved.string();
  }
  // Another job profiling to the same -o at the same time wrote it while this one ran: it is kept,
  // and this job's trace stays at its per-process path.
  const bool taken = IsRegular(target) && FileIdentity(path) != before_job;
  scratch.Remove();
  if (traces.empty()) {
    Say("spillway: no process of the job recorded a trace (no CUDA call through spillway)");
  } else if (traces.size() == 1 && !per_pid && taken) {
    Say(absl::StrCat("spillway: ", output,
                     " was written by another job while this one ran; this job's trace is ",
                     traces[0]));
  } else if (traces.size() == 1 && !per_pid) {
    MoveTrace(traces[0], target);
    Say(absl::StrCat("spillway: trace written to ", output, " (read it with: spillway inspect ",
                     output, ")"));
  } else {
    Say(absl::StrCat("spillway: ", traces.size(), " traces written, one per process:"));
    for (const std::string& trace : traces) Say(absl::StrCat("  ", trace));
  }
  ExitLikeJob(end);
}

}  // namespace spillway::launcher
