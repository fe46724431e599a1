// The hooked driver functions as data: an id per entry of hooked_functions.inc, its name and
// kind, and lookups by name. Knows nothing about CUDA types, so tests and tools can use it.
#ifndef SPILLWAY_INTERPOSE_HOOK_TABLE_H_
#define SPILLWAY_INTERPOSE_HOOK_TABLE_H_

#include <cstddef>
#include <optional>
#include <string_view>

namespace spillway::interpose {

// What a hooked function does, for the exit summary and for the engine to come.
enum class HookKind {
  kInit,
  kProcAddress,
  kMemInfo,
  kAlloc,
  kPool,  // a default pool's settings, statistics and trims
  kVmm,
  kHostAlloc,
  kFree,
  kLaunch,
  kGraphLaunch,
  kGraph,  // graphs instantiated, changed, destroyed (kernel-node access sets)
  kMemcpy,
  kMemset,
  kSync,
  kCapture,  // stream capture begins and ends (device-memory exceptions)
  kIpc,      // IPC handles (refused for managed memory)
  kModule,   // CUDA modules and libraries loaded (record mode writes them) and unloaded
};

// Enumerators are the driver names prefixed with k_ (pasted, so cuda.h's macros never rename
// them): HookId::k_cuMemAlloc_v2.
enum class HookId : int {
#define SPILLWAY_HOOK(kind, name, params, args) k_##name,
#include "interpose/hooked_functions.inc"
};

inline constexpr int kNumHooks = 0
#define SPILLWAY_HOOK(kind, name, params, args) +1
#include "interpose/hooked_functions.inc"
    ;

struct HookInfo {
  std::string_view name;
  HookKind kind;
};

inline constexpr HookInfo kHookInfo[kNumHooks] = {
#define SPILLWAY_HOOK(kind, name, params, args) {#name, HookKind::kind},
#include "interpose/hooked_functions.inc"
};

constexpr int Index(HookId id) { return static_cast<int>(id); }
constexpr std::string_view HookName(HookId id) { return kHookInfo[Index(id)].name; }
constexpr HookKind KindOf(int index) { return kHookInfo[index].kind; }

// The id of the hooked function called `name`, or nullopt. A linear scan: dlsym and
// cuGetProcAddress are not hot paths.
std::optional<HookId> FindHook(std::string_view name);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_HOOK_TABLE_H_
