// Stands in for NCCL in backing_test: a shared library (named libspillway_test_fakenccl.so) that
// allocates device memory itself, so SPILLWAY_DEVICE_MODULES=fakenccl must keep it device memory.
#include <cuda.h>

extern "C" __attribute__((visibility("default"), noinline)) CUresult FakeNcclAlloc(
    CUdeviceptr* dptr, size_t bytes) {
  const CUresult result = cuMemAlloc(dptr, bytes);
  asm volatile("" ::: "memory");  // keeps the call from becoming a tail call (its frame stays)
  return result;
}
