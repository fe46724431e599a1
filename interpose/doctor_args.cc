// spillway-doctor's usage and command line (doctor_args.h), read with CLI11
// (common/command_line.h).
#include "interpose/doctor_args.h"

#include "common/command_line.h"

namespace spillway::doctor {
namespace {

constexpr const char* kUsage =
    "usage: spillway-doctor [--driver PATH] [--driver-version] [--parse-size TEXT]\n"
    "Reports what the CUDA driver supports that spillway relies on, and whether the hooks\n"
    "resolve (run it as `spillway doctor` so libspillway.so is preloaded). --driver-version\n"
    "prints only the CUDA version the driver reports (e.g. 13000); --parse-size prints the\n"
    "bytes a size such as 8GiB stands for, as spillway reads it.\n";

}  // namespace

std::optional<int> ParseDoctorArgs(int argc, char** argv, DoctorArgs* args) {
  CLI::App app;
  std::string parse_size;
  app.add_option("--driver", args->driver)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("--version", args->version);
  app.add_flag("--driver-version", args->driver_version);
  CLI::Option* size = app.add_option("--parse-size", parse_size)
                          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  const CommandLineTool tool = {.name = "spillway-doctor",
                                .usage = kUsage,
                                .unknown_option = "unknown option '{}'",
                                .extra_argument = "unknown option '{}'"};
  if (const std::optional<int> done = ParseCommandLine(app, tool, argc, argv)) return done;
  if (size->count() > 0) args->parse_size = parse_size;
  return std::nullopt;
}

}  // namespace spillway::doctor
