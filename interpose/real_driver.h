// Resolution of what the hooks forward to: the real dlsym (the one after libspillway.so) and the
// real driver's functions, looked up in libcuda.so.1 by name, lazily on first use.
#ifndef SPILLWAY_INTERPOSE_REAL_DRIVER_H_
#define SPILLWAY_INTERPOSE_REAL_DRIVER_H_

#include <atomic>
#include <string>

#include "interpose/hook_table.h"

namespace spillway::interpose {

using DlsymFn = void* (*)(void*, const char*);

// The real dlsym: dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"), else "GLIBC_2.2.5". Null only if
// neither exists.
DlsymFn RealDlsym();

enum DriverState : int { kUnresolved = 0, kResolving = 1, kReady = 2, kFailed = 3 };
extern std::atomic<int> g_driver_state;
extern std::atomic<void*> g_real_functions[kNumHooks];

// True once the real driver's table is filled. The first call resolves it: libcuda.so.1 if it is
// already loaded, else (when `allow_load`) dlopen()ed. Without the driver, false (logged once).
// The hooks reach it through runtime.h's EnsureReady, which reads the settings first.
bool ResolveDriverSlow(bool allow_load);

// The real function for hook `index`, or null (driver unresolved or lacking it).
inline void* RealFunction(int index) {
  return g_real_functions[index].load(std::memory_order_relaxed);
}

// The hook whose real function is `real`, or -1.
int HookIndexOfReal(const void* real);

// File name of the resolved driver ("" before resolution).
std::string DriverPath();

// After fork, in the child: a resolution cut short by the fork starts again.
void ResetDriverAfterFork();

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_REAL_DRIVER_H_
