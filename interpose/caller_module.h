// Which module an allocation comes from, for SPILLWAY_DEVICE_MODULES: the calling frames (a
// shallow walk) looked up in the module map (profiler/callsite/module_map.h, the same scan of
// loaded objects that call-site stacks use) and checked against the loaded modules whose path
// contains a listed part. Cheap when no listed module is loaded (no walk at all): which modules
// match is recomputed only when the set of loaded objects (or the list) changes.
#ifndef SPILLWAY_INTERPOSE_CALLER_MODULE_H_
#define SPILLWAY_INTERPOSE_CALLER_MODULE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::interpose {

// True when `path` contains one of `parts` (plain substring match).
bool ModuleListed(std::string_view path, const std::vector<std::string>& parts);

// Loads the fast stack walk (libunwind, privately: profiler/callsite/unwinder.h) if it can; without
// it ListedCallerModule walks with glibc's backtrace(). Call while the library initializes, not
// from a hook (dlopen takes the loader lock). True when the fast walk is available.
bool PrepareCallerWalk();

// How many frames above the caller are checked: deep enough for a library that calls the driver
// through its own wrapper or cudart (NCCL links cudart statically), shallow enough to stay cheap.
inline constexpr int kCallerFrames = 16;

// The path of the first listed module among the calling thread's innermost kCallerFrames frames;
// nullopt when none (or `parts` is empty). Thread-safe.
std::optional<std::string> ListedCallerModule(const std::vector<std::string>& parts);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_CALLER_MODULE_H_
