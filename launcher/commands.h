// The launcher's commands: `run`, `profile`, `doctor`, and the C++ tools it hands over to (plan,
// simulate, inspect, report, export). Each returns only through exit or exec.
#ifndef SPILLWAY_LAUNCHER_COMMANDS_H_
#define SPILLWAY_LAUNCHER_COMMANDS_H_

#include <string>
#include <vector>

namespace spillway::launcher {

[[noreturn]] void RunCommand(const std::vector<std::string>& args);
[[noreturn]] void ProfileCommand(const std::vector<std::string>& args);
[[noreturn]] void DoctorCommand(const std::vector<std::string>& args);

// Replaces the launcher with TOOL (spillway-plan, ...) from spillway's folder, which parses its own
// options and prints its own usage.
[[noreturn]] void ToolCommand(const std::string& tool, const std::vector<std::string>& args);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_COMMANDS_H_
