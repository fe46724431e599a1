// A job whose kernel gets a pointer into the middle of an allocation: `store` (from the shim's
// noop kernel library, given as argv[1]) writes a value 4096 bytes into a 64 KiB buffer. For
// record mode's test that a launch's access carries the offset of the pointer it was given.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

void Check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) {
    std::fprintf(stderr, "record_interior_program: %s failed (%d)\n", what, result);
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: record_interior_program KERNEL_LIBRARY\n");
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
  Check(cuCtxSynchronize(), "cuCtxSynchronize");
  Check(cuMemFree(buffer), "cuMemFree");
  std::printf("stored %u\n", back);
  return back == 42 ? 0 : 1;
}
