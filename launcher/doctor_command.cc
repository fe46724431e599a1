// `spillway doctor` (spillway-doctor with libspillway.so preloaded) and the tools the launcher
// hands over to. doctor's few options are read with CLI11, the project's parser; its own help
// flag is off so that the texts stay the launcher's.
#include <cstdlib>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "launcher/commands.h"
#include "launcher/output.h"
#include "launcher/paths.h"
#include "launcher/process.h"
#include "launcher/usage.h"

namespace spillway::launcher {
namespace {

// doctor's options.
struct DoctorOptions {
  bool help = false;
  bool version = false;
  bool simgpu = false;
  std::string driver;
};

// Reads ARGS (after `doctor`); exits with the usage error when they are not doctor's.
DoctorOptions ParseDoctorOptions(const std::vector<std::string>& args) {
  // CLI11 would say "--driver: 1 required TEXT missing": the launcher's words come first.
  if (!args.empty() && args.back() == "--driver") {
    UsageError("option --driver needs a value", Command::kDoctor);
  }
  DoctorOptions options;
  CLI::App app("", "spillway doctor");
  app.set_help_flag();
  app.allow_extras();
  // (A flag takes no value: "--simgpu=1" is an error, as it was.)
  app.add_flag("-h,--help", options.help)->disable_flag_override();
  app.add_flag("--version", options.version)->disable_flag_override();
  app.add_flag("--simgpu", options.simgpu)->disable_flag_override();
  app.add_option("--driver", options.driver)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 reads a vector backwards
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    UsageError(absl::StrCat("doctor: ", error.what()), Command::kDoctor);
  }
  if (options.help || options.version) return options;
  if (const std::vector<std::string> extras = app.remaining(); !extras.empty()) {
    UsageError(absl::StrCat("doctor: unknown option '", extras.front(), "'"), Command::kDoctor);
  }
  return options;
}

// spillway's folder, or exit 1 (FindLibdir said why).
std::string LibdirOrExit() {
  std::optional<std::string> libdir = FindLibdir();
  if (!libdir) std::exit(1);
  return *libdir;
}

}  // namespace

void DoctorCommand(const std::vector<std::string>& args) {
  const DoctorOptions options = ParseDoctorOptions(args);
  ExitOnHelpOrVersion(options.help, options.version, Command::kDoctor);
  const std::string libdir = LibdirOrExit();
  if (const std::optional<CheckFailure> failure = CheckPreloadable("doctor", libdir)) {
    Say(failure->message);
    std::exit(failure->status);
  }
  if (options.simgpu) UseSimgpu(libdir);
  const std::string doctor = libdir + "/spillway-doctor";
  if (!IsExecutableFile(doctor)) {
    Say(absl::StrCat("spillway: doctor: ", doctor, " not found; build it with scripts/build.sh"));
    std::exit(1);
  }
  const char* preload = std::getenv("LD_PRELOAD");
  const std::string value = preload != nullptr && preload[0] != '\0'
                                ? absl::StrCat(preload, ":", libdir, "/libspillway.so")
                                : libdir + "/libspillway.so";
  setenv("LD_PRELOAD", value.c_str(), 1);
  std::vector<std::string> argv = {doctor};
  if (!options.driver.empty()) argv.insert(argv.end(), {"--driver", options.driver});
  ExecOrExit(argv, "doctor");
}

void ToolCommand(const std::string& tool, const std::vector<std::string>& args) {
  const std::string libdir = LibdirOrExit();
  const std::string path = libdir + "/" + tool;
  if (!IsExecutableFile(path)) {
    Say(absl::StrCat("spillway: ", path, " not found; build it with scripts/build.sh"));
    std::exit(1);
  }
  std::vector<std::string> argv = {path};
  argv.insert(argv.end(), args.begin(), args.end());
  ExecOrExit(argv, tool);
}

}  // namespace spillway::launcher
