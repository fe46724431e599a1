// `spillway run`: options checked before the job starts, settings exported, the job run under
// spillway-wait (or in the launcher's place with --quiet), and the launcher ending as it did.
#include "launcher/run_command.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "launcher/commands.h"
#include "launcher/framework_env.h"
#include "launcher/output.h"
#include "launcher/paths.h"
#include "launcher/process.h"
#include "launcher/run_options.h"
#include "launcher/size_check.h"
#include "launcher/summary_files.h"

namespace spillway::launcher {
namespace {

// Prints FAILURE's line and exits with its status, when there is one.
void ExitOn(const std::optional<CheckFailure>& failure) {
  if (!failure) return;
  Say(failure->message);
  std::exit(failure->status);
}

void Export(const char* name, const std::string& value) {
  if (!value.empty()) setenv(name, value.c_str(), 1);
}

}  // namespace

PreparedRun PrepareRun(Command usage, const std::vector<std::string>& args,
                       const std::string& command_name) {
  const RunParse parse = ParseRunOptions(args, command_name);
  const RunOptions& options = parse.options;
  ExitOnHelpOrVersion(options.help, options.version, usage);
  if (!parse.error.empty()) UsageError(parse.error, usage);
  if (!options.policy.empty() && access(options.policy.c_str(), R_OK) != 0) {
    UsageError(
        absl::StrCat(command_name, ": bad --policy '", options.policy, "' (no such readable file)"),
        usage);
  }
  PreparedRun run;
  run.command_name = command_name;
  run.quiet = options.quiet;
  const std::optional<std::string> libdir = FindLibdir();
  if (!libdir) std::exit(1);
  run.libdir = *libdir;
  for (const auto& [option, value, least] : {std::tuple<const char*, const std::string&, uint64_t>{
                                                 "--device-memory", options.device_memory, 4096},
                                             {"--host-memory", options.host_memory, 0},
                                             {"--ballast-headroom", options.headroom, 0}}) {
    if (std::optional<std::string> error = CheckSize(command_name, option, value, least)) {
      UsageError(*error, usage);
    }
  }
  if (!options.headroom.empty() && !options.ballast) {
    UsageError(absl::StrCat(command_name, ": --ballast-headroom needs --ballast"), usage);
  }
  if (!options.summary.empty()) ExitOn(CheckSummaryPath(command_name, options.summary));
  ExitOn(CheckPreloadable(command_name, run.libdir));
  ExitOn(CheckProgram(command_name, options.job[0]));

  if (options.simgpu) UseSimgpu(run.libdir);
  if (!options.summary.empty()) Export("SPILLWAY_SUMMARY", AbsolutePath(options.summary));
  Export("SPILLWAY_MODE", options.mode);
  Export("SPILLWAY_LOG", options.log);
  if (!options.log_file.empty()) Export("SPILLWAY_LOG_FILE", AbsolutePath(options.log_file));
  Export("SPILLWAY_DEVICE_MEMORY", options.device_memory);
  Export("SPILLWAY_HOST_MEMORY", options.host_memory);
  if (!options.policy.empty()) {
    std::error_code error;
    const std::filesystem::path policy = std::filesystem::weakly_canonical(
        std::filesystem::path(AbsolutePath(options.policy)), error);
    Export("SPILLWAY_POLICY", error ? AbsolutePath(options.policy) : policy.string());
  }
  Export("SPILLWAY_EVICTION", options.eviction);
  if (options.ballast) Export("SPILLWAY_BALLAST", "1");
  Export("SPILLWAY_BALLAST_HEADROOM", options.headroom);
  const char* mode = std::getenv("SPILLWAY_MODE");
  if (mode == nullptr || std::string_view(mode) != "off") {
    const FrameworkSettings settings = SetFrameworkAllocators(
        options.keep_arenas, options.keep_arenas ? -1 : DriverCudaVersion(run.libdir));
    if (!options.quiet) {
      for (const std::string& line : ReportFrameworkAllocators(settings)) Say(line);
    }
  }
  const char* preload = std::getenv("LD_PRELOAD");
  run.preload = absl::StrCat(preload != nullptr && preload[0] != '\0' ? preload : "",
                             preload != nullptr && preload[0] != '\0' ? ":" : "", run.libdir,
                             "/libspillway.so");
  run.job = options.job;
  return run;
}

void ExecJob(const PreparedRun& run) {
  setenv("LD_PRELOAD", run.preload.c_str(), 1);
  ExecOrExit(run.job, run.command_name);
}

void PrepareScratch(const PreparedRun& run, Scratch& scratch, const std::string& note) {
  std::string why;
  if (!IsExecutableFile(run.libdir + "/spillway-wait")) {
    why = absl::StrCat(run.libdir, "/spillway-wait not found");
  } else if (!scratch.Make()) {
    const char* tmpdir = std::getenv("TMPDIR");
    why = absl::StrCat("cannot make a temporary folder in ",
                       tmpdir != nullptr && tmpdir[0] != '\0' ? absl::StrCat(tmpdir, " or ") : "",
                       "/tmp");
  }
  if (why.empty()) return;
  Say(absl::StrCat("spillway: ", run.command_name, ": ", why,
                   ": the job runs without the summary lines", note));
  ExecJob(run);
}

JobEnd RunAndSummarize(const PreparedRun& run, const Scratch& scratch,
                       const std::string& progress_list) {
  std::optional<time_t> written_after;
  if (!run.quiet) {
    const char* summary = std::getenv("SPILLWAY_SUMMARY");
    if (summary == nullptr || summary[0] == '\0') {
      Export("SPILLWAY_SUMMARY", scratch.path() + "/summary-%p.json");
    } else {
      written_after = std::time(nullptr) - 1;
    }
  }
  const JobEnd end = RunUnderWaiter({.waiter = run.libdir + "/spillway-wait",
                                     .status_file = scratch.path() + "/status",
                                     .preload = run.preload,
                                     .command_name = run.command_name,
                                     .job = run.job,
                                     .progress_list = progress_list});
  if (!run.quiet) PrintSummaries(std::getenv("SPILLWAY_SUMMARY"), written_after, end);
  return end;
}

void RunCommand(const std::vector<std::string>& args) {
  const PreparedRun run = PrepareRun(Command::kRun, args, "run");
  if (run.quiet) ExecJob(run);
  Scratch scratch;
  PrepareScratch(run, scratch, "");
  const JobEnd end = RunAndSummarize(run, scratch, "");
  scratch.Remove();
  ExitLikeJob(end);
}

}  // namespace spillway::launcher
