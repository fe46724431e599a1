// A job whose kernel gets a pointer into the middle of an allocation: `store` (from the shim's
// noop kernel library, given as argv[1]) writes a value 4096 bytes into a 64 KiB buffer. For
// record mode's test that a launch's access carries the offset of the pointer it was given.
// With --launch-at-exit it launches `store` once more after its last synchronization and exits
// without synchronizing again (the recorder must still time that launch). With --sync-v2 it
// synchronizes through what cuGetProcAddress answers for cuCtxSynchronize at 13000, as CUDA 13's
// cudart does: cuCtxSynchronize_v2, which takes a context.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void Check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) {
    std::fprintf(stderr, "record_interior_program: %s failed (%d)\n", what, result);
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool launch_at_exit = argc == 3 && std::strcmp(argv[2], "--launch-at-exit") == 0;
  const bool sync_v2 = argc == 3 && std::strcmp(argv[2], "--sync-v2") == 0;
  if (argc != 2 && !launch_at_exit && !sync_v2) {
    std::fprintf(stderr,
                 "usage: record_interior_program KERNEL_LIBRARY [--launch-at-exit|--sync-v2]\n");
    return 2;
  }
  Check(cuInit(0), "cuInit");
  CUdevice device = 0;
  Check(cuDeviceGet(&device, 0), "cuDeviceGet");
  CUcontext context = nullptr;
  Check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  Check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
  CUmodule module = nullptr;
  Check(cuModuleLoad(&module, argv[1]), "cuModuleLoad");
  CUfunction store = nullptr;
  Check(cuModuleGetFunction(&store, module, "store"), "cuModuleGetFunction");
  CUdeviceptr buffer = 0;
  Check(cuMemAlloc(&buffer, 64 << 10), "cuMemAlloc");
  uint64_t address = buffer + 4096;
  uint32_t value = 42;
  void* params[] = {&address, &value};
  Check(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), "cuLaunchKernel");
  uint32_t back = 0;
  Check(cuMemcpyDtoH(&back, buffer + 4096, sizeof(back)), "cuMemcpyDtoH");
  if (sync_v2) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status;
    Check(cuGetProcAddress("cuCtxSynchronize", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
          "cuGetProcAddress(cuCtxSynchronize, 13000)");
    if (fn == nullptr) Check(CUDA_ERROR_NOT_FOUND, "cuCtxSynchronize at 13000");
    Check(reinterpret_cast<CUresult (*)(CUcontext)>(fn)(nullptr), "cuCtxSynchronize_v2");
  } else {
    Check(cuCtxSynchronize(), "cuCtxSynchronize");
  }
  std::printf("stored %u\n", back);
  if (launch_at_exit) {  // never synchronized, never freed: exit right after the launch
    Check(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), "cuLaunchKernel");
    return back == 42 ? 0 : 1;
  }
  Check(cuMemFree(buffer), "cuMemFree");
  return back == 42 ? 0 : 1;
}
