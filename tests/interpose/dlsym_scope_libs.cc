// Two libraries for the dlsym scope test (no_driver_test.cc): the inner one defines a probe
// symbol; the outer one depends on it and looks the probe up with dlsym(RTLD_DEFAULT, ...). Loaded
// with dlopen(RTLD_LOCAL), the probe is in the outer library's scope but not in the global one:
// glibc finds it only when it sees the outer library as dlsym's caller.
#include <dlfcn.h>

#ifdef SPILLWAY_SCOPE_INNER
extern "C" __attribute__((visibility("default"))) int spillway_scope_probe() { return 7; }
#else
extern "C" int spillway_scope_probe();
extern "C" __attribute__((visibility("default"))) int spillway_scope_outer_finds_probe() {
  // The direct call keeps the dependency on the inner library.
  if (spillway_scope_probe() != 7) return 0;
  return dlsym(RTLD_DEFAULT, "spillway_scope_probe") != nullptr ? 1 : 0;
}
#endif
