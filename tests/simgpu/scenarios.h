// Scenarios that need a process of their own (a configuration read at cuInit, the exit-time
// stats file): simgpu_test runs itself as `simgpu_test --scenario NAME` with the environment set.
#ifndef SPILLWAY_TESTS_SIMGPU_SCENARIOS_H_
#define SPILLWAY_TESTS_SIMGPU_SCENARIOS_H_

#include <string>

// Runs scenario `name`; prints `key=value` lines on stdout; returns the process exit code
// (0 when every check inside passed).
int RunScenario(const std::string& name);

#endif  // SPILLWAY_TESTS_SIMGPU_SCENARIOS_H_
