// Run by no_driver_test with libspillway.so preloaded. With no libcuda.so.1 to be found, reaching
// a hook must fail cleanly (CUDA_ERROR_NOT_INITIALIZED), never crash: prints the result code
// twice. With an old driver (old_driver.cc), `probe` also prints whether dlsym(RTLD_DEFAULT, ...)
// finds an entry point spillway hooks that this driver lacks, and one it has.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  using InitFn = int (*)(unsigned int);
  const auto init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "cuInit"));
  if (init == nullptr) {
    std::printf("no cuInit\n");
    return 1;
  }
  std::printf("cuInit=%d\n", init(0));
  std::printf("cuInit=%d\n", init(0));
  if (argc > 1 && std::strcmp(argv[1], "probe") == 0) {
    std::printf("found cuCtxSynchronize_v2=%d\n",
                dlsym(RTLD_DEFAULT, "cuCtxSynchronize_v2") != nullptr ? 1 : 0);
    std::printf("found cuInit=%d\n", dlsym(RTLD_DEFAULT, "cuInit") != nullptr ? 1 : 0);
  }
  return 0;
}
