// spillway-doctor's command line (doctor_args.cc reads it with CLI11, apart from doctor.cc so that
// the checks compile without it).
#ifndef SPILLWAY_INTERPOSE_DOCTOR_ARGS_H_
#define SPILLWAY_INTERPOSE_DOCTOR_ARGS_H_

#include <optional>
#include <string>

namespace spillway::doctor {

struct DoctorArgs {
  std::string driver = "libcuda.so.1";    // --driver PATH
  bool version = false;                   // --version: "spillway X.Y.Z"
  bool driver_version = false;            // --driver-version
  std::optional<std::string> parse_size;  // --parse-size TEXT
};

// Reads argv into `args`. Returns the exit status when the command line is all there is to do:
// 0 after --help (the usage on stdout), 2 after a bad argument (one line naming it and the usage
// on stderr); nullopt to go on.
std::optional<int> ParseDoctorArgs(int argc, char** argv, DoctorArgs* args);

}  // namespace spillway::doctor

#endif  // SPILLWAY_INTERPOSE_DOCTOR_ARGS_H_
