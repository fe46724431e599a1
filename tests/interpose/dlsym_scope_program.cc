// Loads the outer scope library (dlsym_scope_libs.cc) with RTLD_LOCAL and prints whether its
// dlsym(RTLD_DEFAULT, ...) of a symbol of its own dependency finds it: "found=1" as glibc has it.
// usage: dlsym_scope_program OUTER_LIBRARY
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* outer = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (outer == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  using Finds = int (*)();
  const auto finds = reinterpret_cast<Finds>(dlsym(outer, "spillway_scope_outer_finds_probe"));
  if (finds == nullptr) return 1;
  std::printf("found=%d\n", finds());
  return 0;
}
