// A driver-API program run under the preload by roads_test: it reaches the driver by the three
// roads spillway must cover (linked calls, dlopen+dlsym, cudart's cuGetProcAddress pattern),
// checks each road hands it spillway's hooks, and makes a known set of calls that the test then
// finds counted in the exit summary. usage: interpose_roads_program KERNEL_LIBRARY
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int g_failures = 0;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "roads: FAILED: %s\n", what);
    ++g_failures;
  }
}

void CheckCu(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) {
    std::fprintf(stderr, "roads: %s returned %d\n", what, static_cast<int>(result));
    ++g_failures;
  }
}

bool InSpillway(const void* fn) {
  Dl_info info;
  return fn != nullptr && dladdr(fn, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "libspillway.so") != nullptr;
}

// Road (a): calls linked against libcuda.so.1; LD_PRELOAD puts libspillway.so first.
void DirectRoad(CUfunction store, CUfunction noop) {
  Check(InSpillway(reinterpret_cast<void*>(&cuMemAlloc_v2)), "linked cuMemAlloc_v2 is the hook");
  CUdeviceptr plain = 0;
  CUdeviceptr managed = 0;
  CheckCu(cuMemAlloc(&plain, 1 << 20), "cuMemAlloc");
  CheckCu(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
  CheckCu(cuMemsetD32(plain, 7, 256), "cuMemsetD32");
  unsigned int host[256] = {};
  CheckCu(cuMemcpyDtoH(host, plain, sizeof(host)), "cuMemcpyDtoH");
  Check(host[255] == 7, "memset value copied back");
  uint64_t address = managed;
  uint32_t value = 42;
  void* params[] = {&address, &value};
  CheckCu(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), "cuLaunchKernel");
  CheckCu(cuLaunchKernel(noop, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), "cuLaunchKernel");
  CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
  Check(*reinterpret_cast<uint32_t*>(managed) == 42, "kernel stored into managed memory");
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CheckCu(cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo");
  CheckCu(cuMemFree(plain), "cuMemFree");
  CheckCu(cuMemFree(managed), "cuMemFree");
}

// Road (b): dlopen("libcuda.so.1") + dlsym, as TensorFlow/XLA do.
void DlsymRoad(CUfunction noop) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  Check(driver != nullptr, "dlopen libcuda.so.1");
  if (driver == nullptr) return;
  using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
  using FreeFn = CUresult (*)(CUdeviceptr);
  using LaunchFn = decltype(&cuLaunchKernel);
  using SyncFn = CUresult (*)(CUstream);
  const auto alloc = reinterpret_cast<AllocFn>(dlsym(driver, "cuMemAlloc_v2"));
  const auto release = reinterpret_cast<FreeFn>(dlsym(driver, "cuMemFree_v2"));
  const auto launch = reinterpret_cast<LaunchFn>(dlsym(driver, "cuLaunchKernel"));
  const auto sync = reinterpret_cast<SyncFn>(dlsym(driver, "cuStreamSynchronize"));
  Check(InSpillway(reinterpret_cast<void*>(alloc)), "dlsym cuMemAlloc_v2 is the hook");
  Check(InSpillway(reinterpret_cast<void*>(launch)), "dlsym cuLaunchKernel is the hook");
  Check(InSpillway(reinterpret_cast<void*>(sync)), "dlsym cuStreamSynchronize is the hook");
  void* unhooked = dlsym(driver, "cuDeviceGetName");
  Check(unhooked != nullptr && !InSpillway(unhooked), "dlsym of an unhooked name is the driver's");
  Check(dlsym(RTLD_NEXT, "puts") != nullptr, "dlsym(RTLD_NEXT, ...) still works");
  Check(dlsym(driver, "cuNoSuchFunction") == nullptr, "dlsym of a missing name is null");
  if (alloc == nullptr || release == nullptr || launch == nullptr || sync == nullptr) return;
  CUdeviceptr ptr = 0;
  CheckCu(alloc(&ptr, 2 << 20), "dlsym cuMemAlloc_v2");
  CheckCu(launch(noop, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), "dlsym cuLaunchKernel");
  CheckCu(sync(nullptr), "dlsym cuStreamSynchronize");
  CheckCu(release(ptr), "dlsym cuMemFree_v2");
}

// Road (c): cudart's pattern. It asks the driver for "cuGetProcAddress" itself (at 12000 with
// _v2, at 11030 with the legacy entry) and then looks everything else up through the answer.
void ProcAddressRoad(CUfunction noop) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return;
  using GetProcV2 =
      CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  using GetProcLegacy = CUresult (*)(const char*, void**, int, cuuint64_t);
  const auto first = reinterpret_cast<GetProcV2>(dlsym(driver, "cuGetProcAddress_v2"));
  Check(InSpillway(reinterpret_cast<void*>(first)), "dlsym cuGetProcAddress_v2 is the hook");
  if (first == nullptr) return;
  CUdriverProcAddressQueryResult status;
  void* fn = nullptr;
  CheckCu(first("cuGetProcAddress", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress_v2(cuGetProcAddress)");
  Check(InSpillway(fn), "cuGetProcAddress at 12000 is the hook");
  const auto get_proc = reinterpret_cast<GetProcV2>(fn);
  if (get_proc == nullptr) return;

  void* alloc = nullptr;
  void* release = nullptr;
  void* launch = nullptr;
  void* launch_ptsz = nullptr;
  void* sync_ptsz = nullptr;
  CheckCu(get_proc("cuMemAlloc", &alloc, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status), "gpa");
  CheckCu(get_proc("cuMemFree", &release, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status), "gpa");
  CheckCu(get_proc("cuLaunchKernel", &launch, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status), "gpa");
  CheckCu(get_proc("cuLaunchKernel", &launch_ptsz, 12000,
                   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
          "gpa ptsz");
  CheckCu(get_proc("cuStreamSynchronize", &sync_ptsz, 12000,
                   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
          "gpa ptsz");
  for (void* hook : {alloc, release, launch, launch_ptsz, sync_ptsz}) {
    Check(InSpillway(hook), "cuGetProcAddress answer is a hook");
  }
  Check(launch != launch_ptsz, "per-thread cuLaunchKernel is a different hook");
  // CUDA 13's cudart asks for cuCtxSynchronize at 13000 and gets cuCtxSynchronize_v2 (a
  // context argument); an older one, at 12000, the argument-less one. Each must be a hook.
  void* ctx_sync_v2 = nullptr;
  void* ctx_sync = nullptr;
  CheckCu(get_proc("cuCtxSynchronize", &ctx_sync_v2, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "gpa cuCtxSynchronize 13000");
  CheckCu(get_proc("cuCtxSynchronize", &ctx_sync, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "gpa cuCtxSynchronize 12000");
  Check(InSpillway(ctx_sync_v2), "cuCtxSynchronize at 13000 is a hook");
  Check(InSpillway(ctx_sync), "cuCtxSynchronize at 12000 is a hook");
  Check(ctx_sync_v2 != ctx_sync, "cuCtxSynchronize_v2 is a different hook");
  if (ctx_sync_v2 != nullptr) {
    CheckCu(reinterpret_cast<CUresult (*)(CUcontext)>(ctx_sync_v2)(nullptr), "gpa sync v2");
  }
  if (ctx_sync != nullptr) CheckCu(reinterpret_cast<CUresult (*)()>(ctx_sync)(), "gpa sync");
  void* export_table = nullptr;
  get_proc("cuGetExportTable", &export_table, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  Check(export_table == nullptr || !InSpillway(export_table), "cuGetExportTable passes through");
  if (alloc && release && launch && launch_ptsz && sync_ptsz) {
    CUdeviceptr ptr = 0;
    CheckCu(reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(alloc)(&ptr, 3 << 20),
            "gpa cuMemAlloc");
    const auto launch_fn = reinterpret_cast<decltype(&cuLaunchKernel)>(launch);
    const auto launch_ptsz_fn = reinterpret_cast<decltype(&cuLaunchKernel)>(launch_ptsz);
    CheckCu(launch_fn(noop, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), "gpa launch");
    CheckCu(launch_ptsz_fn(noop, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), "gpa launch");
    CheckCu(reinterpret_cast<CUresult (*)(CUstream)>(sync_ptsz)(nullptr), "gpa sync ptsz");
    CheckCu(reinterpret_cast<CUresult (*)(CUdeviceptr)>(release)(ptr), "gpa cuMemFree");
  }

  // The legacy entry, as cudart 11.3+ asks at 11030.
  CheckCu(first("cuGetProcAddress", &fn, 11030, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress_v2(cuGetProcAddress, 11030)");
  Check(InSpillway(fn), "cuGetProcAddress at 11030 is the hook");
  if (fn == nullptr) return;
  void* info = nullptr;
  CheckCu(reinterpret_cast<GetProcLegacy>(fn)("cuMemGetInfo", &info, 11030,
                                              CU_GET_PROC_ADDRESS_DEFAULT),
          "legacy gpa");
  Check(InSpillway(info), "legacy cuGetProcAddress answer is a hook");
  if (info != nullptr) {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    CheckCu(reinterpret_cast<CUresult (*)(size_t*, size_t*)>(info)(&free_bytes, &total_bytes),
            "legacy gpa cuMemGetInfo");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s KERNEL_LIBRARY\n", argv[0]);
    return 2;
  }
  CheckCu(cuInit(0), "cuInit");
  CUdevice device = 0;
  CheckCu(cuDeviceGet(&device, 0), "cuDeviceGet");
  CUcontext context = nullptr;
  CheckCu(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  CheckCu(cuCtxSetCurrent(context), "cuCtxSetCurrent");
  CUmodule module = nullptr;
  CheckCu(cuModuleLoad(&module, argv[1]), "cuModuleLoad");
  CUfunction store = nullptr;
  CUfunction noop = nullptr;
  CheckCu(cuModuleGetFunction(&store, module, "store"), "cuModuleGetFunction(store)");
  CheckCu(cuModuleGetFunction(&noop, module, "noop"), "cuModuleGetFunction(noop)");
  if (g_failures != 0) return 1;

  DirectRoad(store, noop);
  DlsymRoad(noop);
  ProcAddressRoad(noop);

  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(device);
  if (g_failures != 0) {
    std::fprintf(stderr, "roads: %d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("roads: ok\n");
  return 0;
}
