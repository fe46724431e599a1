// Small helpers shared by the driver-API examples: error checks that say what failed, and
// loading the demo kernels as a fatbin on a real GPU or as a host kernel library on simgpu.
#ifndef SPILLWAY_EXAMPLES_EXAMPLE_UTIL_H_
#define SPILLWAY_EXAMPLES_EXAMPLE_UTIL_H_

#include <cuda.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace spillway_demo {

// Exit codes of the examples.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitOutOfMemory = 2;
constexpr int kExitWrongResult = 3;

inline const char* ErrorName(CUresult result) {
  const char* name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) return "unknown error";
  return name;
}

// Prints "<program>: <what> failed: <error name>" and exits.
inline void Fail(const char* what, CUresult result) {
  std::fprintf(stderr, "%s failed: %s\n", what, ErrorName(result));
  std::exit(result == CUDA_ERROR_OUT_OF_MEMORY ? kExitOutOfMemory : kExitError);
}

#define DEMO_CHECK(call)                               \
  do {                                                 \
    const CUresult demo_check_result = (call);         \
    if (demo_check_result != CUDA_SUCCESS) {           \
      ::spillway_demo::Fail(#call, demo_check_result); \
    }                                                  \
  } while (0)

// The folder of the running program (the kernels are built beside it).
inline std::string ProgramDir() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string dir(path, static_cast<size_t>(n));
  return dir.substr(0, dir.find_last_of('/'));
}

// True when the driver is simgpu (its device names start with "simgpu").
inline bool IsSimgpu(CUdevice device) {
  char name[256] = {};
  DEMO_CHECK(cuDeviceGetName(name, sizeof(name), device));
  return std::string(name).rfind("simgpu", 0) == 0;
}

// Loads the demo kernels: libdemo_kernels.so on simgpu, demo_kernels.fatbin on a real GPU.
inline CUmodule LoadDemoKernels(CUdevice device) {
  const std::string path =
      ProgramDir() + (IsSimgpu(device) ? "/libdemo_kernels.so" : "/demo_kernels.fatbin");
  CUmodule module = nullptr;
  const CUresult result = cuModuleLoad(&module, path.c_str());
  if (result != CUDA_SUCCESS) {
    std::fprintf(stderr, "cannot load kernels from %s: %s\n", path.c_str(), ErrorName(result));
    std::exit(kExitError);
  }
  return module;
}

inline CUfunction GetKernel(CUmodule module, const char* name) {
  CUfunction function = nullptr;
  DEMO_CHECK(cuModuleGetFunction(&function, module, name));
  return function;
}

}  // namespace spillway_demo

#endif  // SPILLWAY_EXAMPLES_EXAMPLE_UTIL_H_
