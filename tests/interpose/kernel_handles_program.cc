// A driver-API program run by kernel_handles_test under libspillway.so: launches through handles
// whose parameter layout the shim must not get wrong. One scenario per run:
//   usage: interpose_kernel_handles_program SCENARIO FOUR_LIBRARY THREE_LIBRARY
//   reuse   64 rounds of: load FOUR_LIBRARY, launch its 4-parameter `scale_add`, unload; load
//           THREE_LIBRARY, launch its 3-parameter `fill` with its parameter array ending at a
//           guard page, unload. A new function may get an unloaded one's handle; a shim that kept
//           the 4-parameter layout would read past the 3-entry array (SIGSEGV).
//   reuse_reset  the same, each module unloaded by resetting the primary context
//           (cuDevicePrimaryCtxReset) instead.
//   kernel  THREE_LIBRARY loaded with cuLibraryLoadFromFile; its `fill` CUkernel
//   (cuLibraryGetKernel,
//           as the CUDA runtime launches) launched with cuLaunchKernel and cuLaunchKernelEx.
//   kernel_graph  the same CUkernel in a graph's kernel node (`kern` set, `func` NULL), launched.
// Prints one "key=value" line per fact the test checks; exits 0 when every call and result was as
// expected, 1 otherwise.
#include <cuda.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

namespace {

#define CHECK_CU(call)                                             \
  do {                                                             \
    const CUresult r_ = (call);                                    \
    if (r_ != CUDA_SUCCESS) {                                      \
      std::printf("%s failed: %d\n", #call, static_cast<int>(r_)); \
      std::exit(1);                                                \
    }                                                              \
  } while (0)

constexpr uint64_t kWords = 1024;

// An array of `count` parameter pointers that ends where an inaccessible page begins.
void** GuardedParams(size_t count) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapping =
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) std::exit(1);
  char* bytes = static_cast<char*>(mapping);
  if (mprotect(bytes + page, page, PROT_NONE) != 0) std::exit(1);
  return reinterpret_cast<void**>(bytes + page - count * sizeof(void*));
}

// Rounds of 4-parameter and 3-parameter kernels from modules loaded and unloaded in turn: by
// cuModuleUnload, or (`reset`) by resetting the primary context, which unloads its modules. The
// buffers are made once: the rounds allocate nothing on the heap but the modules, so that a new
// function gets an unloaded one's handle (the point of the test) in most rounds. A reset frees
// the primary context's memory, so there they are managed memory of a context of their own, which
// the primary context's kernels reach too.
int Reuse(const char* four_library, const char* three_library, bool reset) {
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  auto end = [&](CUmodule module) {
    CHECK_CU(reset ? cuDevicePrimaryCtxReset(device) : cuModuleUnload(module));
  };
  CUcontext primary = nullptr, keeper = nullptr;
  CHECK_CU(cuCtxGetCurrent(&primary));
  if (reset) CHECK_CU(cuCtxCreate(&keeper, nullptr, 0, device));
  CUdeviceptr dst = 0, src = 0;
  for (CUdeviceptr* buffer : {&dst, &src}) {
    CHECK_CU(reset ? cuMemAllocManaged(buffer, kWords * 4, CU_MEM_ATTACH_GLOBAL)
                   : cuMemAlloc(buffer, kWords * 4));
  }
  CHECK_CU(cuMemsetD32(dst, 0, kWords));
  CHECK_CU(cuMemsetD32(src, 1, kWords));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuCtxSetCurrent(primary));
  void** three_params = GuardedParams(3);
  std::set<CUfunction> four_handles;
  int reused = 0, wrong = 0;
  constexpr int kRounds = 64;
  uint64_t words = kWords;
  for (int round = 0; round < kRounds; ++round) {
    CUmodule four_module = nullptr;
    CHECK_CU(cuModuleLoad(&four_module, four_library));
    CUfunction scale_add = nullptr;
    CHECK_CU(cuModuleGetFunction(&scale_add, four_module, "scale_add"));
    four_handles.insert(scale_add);
    uint32_t factor = 1;
    void* four_params[] = {&dst, &src, &factor, &words};
    CHECK_CU(cuLaunchKernel(scale_add, 1, 1, 1, 1, 1, 1, 0, nullptr, four_params, nullptr));
    CHECK_CU(cuCtxSynchronize());
    end(four_module);

    CUmodule three_module = nullptr;
    CHECK_CU(cuModuleLoad(&three_module, three_library));
    CUfunction fill = nullptr;
    CHECK_CU(cuModuleGetFunction(&fill, three_module, "fill"));
    if (four_handles.count(fill) != 0) ++reused;
    uint32_t value = static_cast<uint32_t>(round);
    three_params[0] = &dst;
    three_params[1] = &value;
    three_params[2] = &words;
    CHECK_CU(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, three_params, nullptr));
    CHECK_CU(cuCtxSynchronize());
    uint32_t last = 0;
    CHECK_CU(cuMemcpyDtoH(&last, dst + (kWords - 1) * 4, 4));
    if (last != value + kWords - 1) ++wrong;
    end(three_module);
  }
  std::printf("launches=%d\nreused=%d\nwrong=%d\n", 2 * kRounds, reused, wrong);
  if (keeper != nullptr) CHECK_CU(cuCtxSetCurrent(keeper));
  CHECK_CU(cuMemFree(dst));
  CHECK_CU(cuMemFree(src));
  if (keeper != nullptr) CHECK_CU(cuCtxDestroy(keeper));
  return wrong == 0 ? 0 : 1;
}

// THREE_LIBRARY's `fill` as a CUkernel, and `fill`'s 3 parameters filling `buffer` with `value`.
struct KernelLaunch {
  CUlibrary library = nullptr;
  CUkernel fill = nullptr;
  CUdeviceptr buffer = 0;
  uint32_t value = 7;
  uint64_t words = kWords;
  void* params[3] = {&buffer, &value, &words};
};

void LoadFill(const char* three_library, KernelLaunch* launch) {
  CHECK_CU(cuLibraryLoadFromFile(&launch->library, three_library, nullptr, nullptr, 0, nullptr,
                                 nullptr, 0));
  CHECK_CU(cuLibraryGetKernel(&launch->fill, launch->library, "fill"));
  CHECK_CU(cuMemAlloc(&launch->buffer, kWords * 4));
}

// 1 when `launch`'s buffer holds what `fill` writes, else 0.
int Filled(const KernelLaunch& launch) {
  uint32_t last = 0;
  CHECK_CU(cuMemcpyDtoH(&last, launch.buffer + (kWords - 1) * 4, 4));
  return last == launch.value + kWords - 1 ? 1 : 0;
}

// A CUkernel launched directly.
int Kernel(const char* three_library) {
  KernelLaunch launch;
  LoadFill(three_library, &launch);
  const CUfunction as_function = reinterpret_cast<CUfunction>(launch.fill);
  CHECK_CU(cuLaunchKernel(as_function, 1, 1, 1, 1, 1, 1, 0, nullptr, launch.params, nullptr));
  CHECK_CU(cuCtxSynchronize());
  int filled = Filled(launch);
  launch.value = 9;
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  CHECK_CU(cuLaunchKernelEx(&config, as_function, launch.params, nullptr));
  CHECK_CU(cuCtxSynchronize());
  filled += Filled(launch);
  std::printf("launches=2\nfilled=%d\n", filled);
  CHECK_CU(cuMemFree(launch.buffer));
  CHECK_CU(cuLibraryUnload(launch.library));
  return filled == 2 ? 0 : 1;
}

// A CUkernel in a graph's kernel node.
int KernelGraph(const char* three_library) {
  KernelLaunch launch;
  LoadFill(three_library, &launch);
  CUgraph graph = nullptr;
  CHECK_CU(cuGraphCreate(&graph, 0));
  CUDA_KERNEL_NODE_PARAMS node_params{};
  node_params.func = nullptr;
  node_params.kern = launch.fill;  // cuda.h: "will only be referenced if func is NULL"
  node_params.gridDimX = node_params.gridDimY = node_params.gridDimZ = 1;
  node_params.blockDimX = node_params.blockDimY = node_params.blockDimZ = 1;
  node_params.kernelParams = launch.params;
  CUgraphNode node = nullptr;
  CHECK_CU(cuGraphAddKernelNode(&node, graph, nullptr, 0, &node_params));
  CUgraphExec exec = nullptr;
  CHECK_CU(cuGraphInstantiate(&exec, graph, 0));
  CHECK_CU(cuGraphLaunch(exec, nullptr));
  CHECK_CU(cuCtxSynchronize());
  const int filled = Filled(launch);
  std::printf("graph_launches=1\nfilled=%d\n", filled);
  CHECK_CU(cuGraphExecDestroy(exec));
  CHECK_CU(cuGraphDestroy(graph));
  CHECK_CU(cuMemFree(launch.buffer));
  CHECK_CU(cuLibraryUnload(launch.library));
  return filled == 1 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s SCENARIO FOUR_LIBRARY THREE_LIBRARY\n", argv[0]);
    return 1;
  }
  const std::string scenario = argv[1];
  CHECK_CU(cuInit(0));
  CUdevice device = 0;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_CU(cuCtxSetCurrent(context));
  int status = 1;
  if (scenario == "reuse") status = Reuse(argv[2], argv[3], /*reset=*/false);
  if (scenario == "reuse_reset") status = Reuse(argv[2], argv[3], /*reset=*/true);
  if (scenario == "kernel") status = Kernel(argv[3]);
  if (scenario == "kernel_graph") status = KernelGraph(argv[3]);
  std::printf("done=%d\n", status);
  return status;
}
