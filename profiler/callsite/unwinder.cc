// Private loading of libunwind and the walk through unw_backtrace.
#include "profiler/callsite/unwinder.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <mutex>

namespace spillway::callsite {
namespace {

using UnwBacktraceFn = int (*)(void**, int);

constinit const char* g_library = "libunwind.so.8";
constinit std::atomic<UnwBacktraceFn> g_backtrace{nullptr};
constinit std::atomic<int> g_state{0};  // 0 not tried, 1 loaded, 2 unavailable
std::mutex g_load_mutex;

void Load(UnwindLogFn log) {
  std::lock_guard lock(g_load_mutex);
  if (g_state.load(std::memory_order_acquire) != 0) return;
  void* handle = dlopen(g_library, RTLD_NOW | RTLD_LOCAL);
  void* symbol = handle != nullptr ? dlsym(handle, "unw_backtrace") : nullptr;
  if (symbol == nullptr) {
    if (log != nullptr) {
      char line[512];
      const char* why = dlerror();
      std::snprintf(line, sizeof(line),
                    "call-site stacks off: cannot load unw_backtrace from %s (%s); install "
                    "libunwind8 to record them",
                    g_library, why != nullptr ? why : "symbol missing");
      log(line);
    }
    g_state.store(2, std::memory_order_release);
    return;
  }
  g_backtrace.store(reinterpret_cast<UnwBacktraceFn>(symbol), std::memory_order_release);
  g_state.store(1, std::memory_order_release);
}

}  // namespace

bool UnwinderAvailable(UnwindLogFn log) {
  if (g_state.load(std::memory_order_acquire) == 0) Load(log);
  return g_state.load(std::memory_order_acquire) == 1;
}

// Not inlined, so frame 0 of unw_backtrace's answer is always this function.
__attribute__((noinline)) int Backtrace(void** pcs, int max) {
  const UnwBacktraceFn walk = g_backtrace.load(std::memory_order_acquire);
  if (walk == nullptr || max <= 0) return 0;
  void* buffer[129];
  const int want = max < 128 ? max + 1 : 129;
  const int count = walk(buffer, want);
  int out = 0;
  for (int i = 1; i < count; ++i) pcs[out++] = buffer[i];  // drop this function's own frame
  return out;
}

void ResetUnwinderForTesting(const char* library) {
  g_library = library;
  g_backtrace.store(nullptr, std::memory_order_release);
  g_state.store(0, std::memory_order_release);
}

}  // namespace spillway::callsite
