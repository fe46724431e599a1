// The framework settings `spillway run` exports (unless the user chose already): per-tensor,
// stream-ordered allocators that spillway can back with managed memory, growth on demand instead
// of preallocation; and the one line on stderr saying what was set and what kept, with warnings
// for settings spillway cannot serve.
#ifndef SPILLWAY_LAUNCHER_FRAMEWORK_ENV_H_
#define SPILLWAY_LAUNCHER_FRAMEWORK_ENV_H_

#include <string>
#include <vector>

namespace spillway::launcher {

// What SetFrameworkAllocators did: the variables it set ("NAME=VALUE") and the user's it kept
// ("NAME"), and the driver's CUDA version ("12.4") when it has no managed memory pools.
struct FrameworkSettings {
  std::vector<std::string> set, kept;
  std::string driver_without_pools;
};

// Exports the settings into this process's environment. KEEP_ARENAS is --framework-allocator;
// DRIVER_VERSION is what the driver reports (13000), or -1 when unknown.
FrameworkSettings SetFrameworkAllocators(bool keep_arenas, int driver_version);

// The lines (without newlines) to print for SETTINGS, read against the environment as it is now.
std::vector<std::string> ReportFrameworkAllocators(const FrameworkSettings& settings);

// The CUDA version spillway-doctor in LIBDIR reads from the driver, or -1 when it cannot tell
// (no driver, no doctor, no answer in 10 s).
int DriverCudaVersion(const std::string& libdir);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_FRAMEWORK_ENV_H_
