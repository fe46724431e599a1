// Small helpers shared by the driver-API examples: error checks that say what failed, opening the
// device, and loading kernels as a fatbin on a real GPU or as a host kernel library on simgpu.
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

// Help asked for (-h, --help): prints the usage on stdout and exits with kExitOk.
inline void ExitIfHelp(bool help, void (*usage)(FILE*)) {
  if (!help) return;
  usage(stdout);
  std::exit(kExitOk);
}

// A bad command line: prints "<program>: <what>" and the usage on stderr, and exits.
[[noreturn]] inline void BadCommandLine(const char* program, const std::string& what,
                                        void (*usage)(FILE*)) {
  std::fprintf(stderr, "%s: %s\n", program, what.c_str());
  usage(stderr);
  std::exit(kExitError);
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

// Loads the kernels built beside the program as `stem`: lib<stem>.so (a host kernel library) on
// simgpu, <stem>.fatbin on a real GPU.
inline CUmodule LoadKernels(CUdevice device, const std::string& stem) {
  const std::string path =
      ProgramDir() + (IsSimgpu(device) ? "/lib" + stem + ".so" : "/" + stem + ".fatbin");
  CUmodule module = nullptr;
  const CUresult result = cuModuleLoad(&module, path.c_str());
  if (result != CUDA_SUCCESS) {
    std::fprintf(stderr, "cannot load kernels from %s: %s\n", path.c_str(), ErrorName(result));
    std::exit(kExitError);
  }
  return module;
}

inline CUmodule LoadDemoKernels(CUdevice device) { return LoadKernels(device, "demo_kernels"); }

// Device 0 with its primary context retained and current, its name and its memory as
// cuMemGetInfo reports it (through spillway: the engine's capacity). Release with
// cuDevicePrimaryCtxRelease(device).
struct OpenedDevice {
  CUdevice device = 0;
  CUcontext context = nullptr;
  char name[256] = {};
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

inline OpenedDevice OpenDevice() {
  OpenedDevice opened;
  DEMO_CHECK(cuInit(0));
  DEMO_CHECK(cuDeviceGet(&opened.device, 0));
  DEMO_CHECK(cuDevicePrimaryCtxRetain(&opened.context, opened.device));
  DEMO_CHECK(cuCtxSetCurrent(opened.context));
  DEMO_CHECK(cuDeviceGetName(opened.name, sizeof(opened.name), opened.device));
  DEMO_CHECK(cuMemGetInfo(&opened.free_bytes, &opened.total_bytes));
  return opened;
}

inline CUfunction GetKernel(CUmodule module, const char* name) {
  CUfunction function = nullptr;
  DEMO_CHECK(cuModuleGetFunction(&function, module, name));
  return function;
}

}  // namespace spillway_demo

#endif  // SPILLWAY_EXAMPLES_EXAMPLE_UTIL_H_
