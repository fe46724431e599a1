// Finds the real dlsym and the real driver. Resolution takes no lock: one thread wins a
// compare-and-swap and fills the table; the others wait for it. The winner holds the reentrancy
// guard, so anything the driver's constructors call while it loads goes straight through.
#include "interpose/real_driver.h"

#include <dlfcn.h>
#include <link.h>
#include <sched.h>

#include "interpose/log.h"
#include "interpose/reentrancy.h"

// Read by the dlsym entry stub (hooks.cc), hence C linkage and a plain pointer accessed with
// __atomic builtins. The resolver runs uninstrumented: a sanitizer runtime calls
// dlsym(RTLD_NEXT, ...) while it initializes, before its shadow memory (ThreadSanitizer: its
// thread state) exists, and that call comes through our stub.
extern "C" {
__attribute__((visibility("hidden"))) constinit void* spillway_real_dlsym = nullptr;
__attribute__((visibility("hidden"))) void* spillway_resolve_real_dlsym();
}

__attribute__((no_sanitize("address", "undefined", "thread"))) void* spillway_resolve_real_dlsym() {
  void* found = __atomic_load_n(&spillway_real_dlsym, __ATOMIC_ACQUIRE);
  if (found != nullptr) return found;
  found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (found == nullptr) found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  if (found == nullptr) {
    // Preloaded after another dlsym interposer that ends the chain: ask libc itself.
    if (void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD)) {
      found = dlvsym(libc, "dlsym", "GLIBC_2.34");
      if (found == nullptr) found = dlvsym(libc, "dlsym", "GLIBC_2.2.5");
    }
  }
  __atomic_store_n(&spillway_real_dlsym, found, __ATOMIC_RELEASE);
  return found;
}

namespace spillway::interpose {

constinit std::atomic<int> g_driver_state{kUnresolved};
constinit std::atomic<void*> g_real_functions[kNumHooks];

namespace {

constexpr const char* kDriverName = "libcuda.so.1";

// The driver's path; written once by the resolving thread before kReady is published.
constinit char g_driver_path[512] = {};

void* OpenDriver(bool allow_load) {
  void* handle = dlopen(kDriverName, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr && allow_load) handle = dlopen(kDriverName, RTLD_NOW | RTLD_LOCAL);
  return handle;
}

void RememberDriverPath(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    size_t i = 0;
    for (; map->l_name[i] != '\0' && i + 1 < sizeof(g_driver_path); ++i) {
      g_driver_path[i] = map->l_name[i];
    }
    g_driver_path[i] = '\0';
  }
}

// Fills the table from `handle`. Missing functions stay null: their hooks return
// CUDA_ERROR_NOT_SUPPORTED, and lookups of them are never redirected.
void FillTable(void* handle, DlsymFn real_dlsym) {
  int missing = 0;
  for (int i = 0; i < kNumHooks; ++i) {
    const std::string name(kHookInfo[i].name);
    void* real = real_dlsym(handle, name.c_str());
    if (real == nullptr) {
      ++missing;
      Log(LogLevel::kDebug, "the driver has no %s", name.c_str());
    }
    g_real_functions[i].store(real, std::memory_order_relaxed);
  }
  Log(LogLevel::kInfo, "driver %s: %d of %d hooked functions found", g_driver_path,
      kNumHooks - missing, kNumHooks);
}

// The winner's work. Returns the new state.
int Resolve(bool allow_load) {
  ReentrancyGuard guard;
  const DlsymFn real_dlsym = RealDlsym();
  if (real_dlsym == nullptr) {
    ReportProblem(LogLevel::kError, "cannot find the real dlsym; all driver calls pass through");
    return kFailed;
  }
  void* handle = OpenDriver(allow_load);
  if (handle == nullptr) {
    if (!allow_load) return kUnresolved;
    const char* why = dlerror();
    ReportProblem(LogLevel::kError, "cannot load %s: %s", kDriverName,
                  why != nullptr ? why : "not found");
    return kFailed;
  }
  RememberDriverPath(handle);
  FillTable(handle, real_dlsym);
  return kReady;
}

}  // namespace

DlsymFn RealDlsym() {
  void* const known = __atomic_load_n(&spillway_real_dlsym, __ATOMIC_ACQUIRE);
  if (known != nullptr) return reinterpret_cast<DlsymFn>(known);
  return reinterpret_cast<DlsymFn>(spillway_resolve_real_dlsym());
}

bool ResolveDriverSlow(bool allow_load) {
  for (;;) {
    int state = g_driver_state.load(std::memory_order_acquire);
    if (state == kReady) return true;
    if (state == kFailed) return false;
    if (state == kResolving) {
      sched_yield();
      continue;
    }
    if (!g_driver_state.compare_exchange_strong(state, kResolving, std::memory_order_acq_rel)) {
      continue;
    }
    const int result = Resolve(allow_load);
    g_driver_state.store(result, std::memory_order_release);
    return result == kReady;
  }
}

int HookIndexOfReal(const void* real) {
  if (real == nullptr) return -1;
  for (int i = 0; i < kNumHooks; ++i) {
    if (RealFunction(i) == real) return i;
  }
  return -1;
}

std::string DriverPath() {
  if (g_driver_state.load(std::memory_order_acquire) != kReady) return "";
  return g_driver_path;
}

void ResetDriverAfterFork() {
  int resolving = kResolving;
  g_driver_state.compare_exchange_strong(resolving, kUnresolved, std::memory_order_acq_rel);
}

}  // namespace spillway::interpose
