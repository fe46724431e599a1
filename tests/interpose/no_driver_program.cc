// Run by no_driver_test with libspillway.so preloaded and no libcuda.so.1 to be found: reaching a
// hook must fail cleanly (CUDA_ERROR_NOT_INITIALIZED), never crash. Prints the result code.
#include <dlfcn.h>

#include <cstdio>

int main() {
  using InitFn = int (*)(unsigned int);
  const auto init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "cuInit"));
  if (init == nullptr) {
    std::printf("no cuInit\n");
    return 1;
  }
  std::printf("cuInit=%d\n", init(0));
  std::printf("cuInit=%d\n", init(0));
  return 0;
}
