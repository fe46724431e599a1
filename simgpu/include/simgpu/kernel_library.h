/* The contract between simgpu and a host kernel library.
 *
 * On simgpu, cuModuleLoad(path) dlopen()s `path`, a shared object that exports
 *
 *     const SimgpuKernelLibrary* simgpu_kernel_library(void);
 *
 * Each kernel is a host function that simgpu runs on the launching stream's worker thread with
 * the real parameter values. The kernel touches memory through ordinary pointers: simgpu sees
 * every access to managed memory that way (see simgpu/README.md), so a kernel never declares
 * what it touches. It declares only its parameter layout (for cuFuncGetParamInfo and the `extra`
 * launch form) and, optionally, how long it would take on the simulated GPU.
 *
 * Plain C so kernel libraries can be written in C or C++. Bump SIMGPU_KERNEL_ABI_VERSION on any
 * change of these structs; simgpu refuses a library built for another version.
 */
#ifndef SIMGPU_KERNEL_LIBRARY_H_
#define SIMGPU_KERNEL_LIBRARY_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIMGPU_KERNEL_ABI_VERSION 1u

/* One kernel parameter: its byte offset in the packed parameter buffer and its size. */
typedef struct SimgpuParam {
  size_t offset;
  size_t size;
} SimgpuParam;

/* What a kernel sees of its launch. */
typedef struct SimgpuLaunch {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  /* args[i] points to the value of parameter i (as cuLaunchKernel's kernelParams). */
  void* const* args;
} SimgpuLaunch;

typedef struct SimgpuKernel {
  const char* name; /* the name cuModuleGetFunction looks up and cuFuncGetName returns */
  unsigned num_params;
  const SimgpuParam* params;
  /* Runs the kernel (all blocks and threads) on the host. */
  void (*run)(const SimgpuLaunch* launch);
  /* Seconds of compute the kernel would take on the simulated GPU, excluding any stall on
   * memory migration. NULL: simgpu uses SIMGPU_DEFAULT_KERNEL_SECONDS (default 10 us). */
  double (*compute_seconds)(const SimgpuLaunch* launch);
} SimgpuKernel;

typedef struct SimgpuKernelLibrary {
  uint32_t abi_version; /* SIMGPU_KERNEL_ABI_VERSION */
  uint32_t num_kernels;
  const SimgpuKernel* kernels;
} SimgpuKernelLibrary;

/* The one symbol a kernel library exports. */
typedef const SimgpuKernelLibrary* (*SimgpuKernelLibraryFn)(void);
#define SIMGPU_KERNEL_LIBRARY_SYMBOL "simgpu_kernel_library"

#ifdef __cplusplus
}

#include <string.h>

/* C++ kernels: the value of parameter `index` of `launch`, as type T. */
template <typename T>
T SimgpuArg(const SimgpuLaunch* launch, int index) {
  T value;
  memcpy(&value, launch->args[index], sizeof(T));
  return value;
}
#endif

#endif /* SIMGPU_KERNEL_LIBRARY_H_ */
