// The calling thread's stack as return addresses, through libunwind's unw_backtrace loaded
// privately: dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL), never linked, because linked into
// the preloaded library it would take over the process's C++ exception unwinding (DESIGN.md).
// When libunwind cannot be loaded, says so once (through the given logger) and walks nothing.
#ifndef SPILLWAY_PROFILER_CALLSITE_UNWINDER_H_
#define SPILLWAY_PROFILER_CALLSITE_UNWINDER_H_

namespace spillway::callsite {

// Called once with a one-line message when libunwind is unavailable; may be null.
using UnwindLogFn = void (*)(const char* message);

// Loads libunwind on first use (thread-safe; later calls return the first answer). True when
// unw_backtrace is available. `log` receives the one line said when it is not.
bool UnwinderAvailable(UnwindLogFn log = nullptr);

// Fills `pcs` with up to `max` return addresses of the calling thread, innermost first (frame 0
// is the caller of Backtrace). Returns how many; 0 when libunwind is unavailable.
int Backtrace(void** pcs, int max);

// Test hook: forget the previous answer; the next use loads `library` instead of
// libunwind.so.8. Not thread-safe.
void ResetUnwinderForTesting(const char* library);

}  // namespace spillway::callsite

#endif  // SPILLWAY_PROFILER_CALLSITE_UNWINDER_H_
