// The per-thread-default-stream part of backing_program (compiled with
// CUDA_API_PER_THREAD_DEFAULT_STREAM, so cuda.h's names are the _ptsz entry points): stream-ordered
// allocations on the per-thread default stream (a null stream) are managed, used by kernels and
// freed stream-ordered there. A second buffer filled after the first is summed sends the first out
// under a budget below 8 MiB, so that its free is discarded.
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "backing_program.h"

int PerThreadStream(CUfunction fill, CUfunction sum) {
  constexpr uint64_t kBuffer = 4ull << 20;
  uint64_t words = kBuffer / 4;
  CUdeviceptr buffer = 0;
  CUdeviceptr other = 0;
  CUdeviceptr result = 0;
  if (cuMemAllocAsync(&buffer, kBuffer, nullptr) != CUDA_SUCCESS ||
      cuMemAllocAsync(&other, kBuffer, nullptr) != CUDA_SUCCESS ||
      cuMemAllocManaged(&result, sizeof(uint64_t), CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS) {
    std::printf("allocation failed\n");
    return 1;
  }
  std::memset(reinterpret_cast<void*>(result), 0, sizeof(uint64_t));
  uint32_t value = 7;
  void* fill_params[] = {&buffer, &value, &words};
  void* sum_params[] = {&buffer, &words, &result};
  void* other_params[] = {&other, &value, &words};
  unsigned managed = 0;
  const bool ok =
      cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, fill_params, nullptr) == CUDA_SUCCESS &&
      cuLaunchKernel(sum, 1, 1, 1, 1, 1, 1, 0, nullptr, sum_params, nullptr) == CUDA_SUCCESS &&
      cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, buffer) == CUDA_SUCCESS &&
      cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, other_params, nullptr) == CUDA_SUCCESS &&
      cuMemFreeAsync(buffer, nullptr) == CUDA_SUCCESS &&
      cuMemFreeAsync(other, nullptr) == CUDA_SUCCESS &&
      cuStreamSynchronize(nullptr) == CUDA_SUCCESS;
  const uint64_t expected = Expected(value, words);
  const uint64_t got = *reinterpret_cast<const uint64_t*>(result);
  std::printf("ptsz_managed=%u ptsz_wrong=%d\n", managed, got != expected ? 1 : 0);
  cuMemFree(result);
  return ok && got == expected ? 0 : 1;
}
