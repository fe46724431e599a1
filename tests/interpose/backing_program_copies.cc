// The copies and legacy_order scenarios of backing_program.
//
// copies: buffers of 4 MiB totalling more than the engine's budget are filled by kernels, so the
// first ones are evicted; then copies overwrite some of them (the first from the host, the second
// from the fourth, the third's second half from the host on a stream), after two copies the
// driver refuses (into the fourth from a null source and, device-to-device, from pageable host
// memory; into the fifth from a source that runs past its allocation's end), and a kernel sums
// every buffer. Prints null_source=, host_source= and short_source= (the refused copies' results)
// and copies_wrong= (buffers whose sum is not what the copies and fills left).
//
// legacy_order: the same buffers; a host function on the legacy stream that reads the first
// buffer 100 ms later, then a synchronous memset over that buffer's last 3 MiB. The memset's
// discard must wait for the host function as the memset does. Prints legacy_order_wrong=.
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "backing_program.h"

namespace {

constexpr uint64_t kBuffer = 4ull << 20;
constexpr uint64_t kWords = kBuffer / 4;

std::vector<uint32_t> Words(uint32_t value, uint64_t n) {
  std::vector<uint32_t> words(n);
  for (uint64_t i = 0; i < n; ++i) words[i] = value + static_cast<uint32_t>(i);
  return words;
}

// `count` buffers of kBuffer from cuMemAlloc, each filled by `fill` with its index. False (and a
// line said) when a call failed.
bool AllocateFilled(int count, CUfunction fill, std::vector<CUdeviceptr>* buffers) {
  buffers->assign(static_cast<size_t>(count), 0);
  for (int b = 0; b < count; ++b) {
    uint64_t words = kWords;
    uint32_t value = static_cast<uint32_t>(b);
    void* params[] = {&(*buffers)[b], &value, &words};
    if (cuMemAlloc(&(*buffers)[b], kBuffer) != CUDA_SUCCESS ||
        cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) != CUDA_SUCCESS) {
      std::printf("setup failed\n");
      return false;
    }
  }
  return true;
}

}  // namespace

int Copies(int total_mib, CUfunction fill, CUfunction sum) {
  const int count = total_mib / 4;
  if (count < 6) {
    std::printf("copies needs at least 24 MiB\n");
    return 1;
  }
  std::vector<CUdeviceptr> buffers;
  CUdeviceptr sums = 0;
  CUstream stream = nullptr;
  if (cuMemAllocManaged(&sums, count * sizeof(uint64_t), CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS ||
      cuStreamCreate(&stream, CU_STREAM_DEFAULT) != CUDA_SUCCESS) {
    std::printf("setup failed\n");
    return 1;
  }
  std::memset(reinterpret_cast<void*>(sums), 0, count * sizeof(uint64_t));
  if (!AllocateFilled(count, fill, &buffers)) return 1;
  std::vector<uint64_t> expected(count);
  for (int b = 0; b < count; ++b) expected[b] = Expected(static_cast<uint32_t>(b), kWords);

  // Refused by the driver: buffers 3 and 4 must keep what the kernel wrote.
  const CUresult null_source = cuMemcpyHtoD(buffers[3], nullptr, kBuffer);
  std::printf("null_source=%d\n", static_cast<int>(null_source));
  const CUresult short_source = cuMemcpyDtoD(buffers[4], buffers[5] + kBuffer / 2, kBuffer);
  std::printf("short_source=%d\n", static_cast<int>(short_source));
  const std::vector<uint32_t> pageable(kWords, 5);  // not device memory: a DtoD copy refuses it
  const CUresult host_source =
      cuMemcpyDtoD(buffers[3], reinterpret_cast<CUdeviceptr>(pageable.data()), kBuffer);
  std::printf("host_source=%d\n", static_cast<int>(host_source));

  const std::vector<uint32_t> whole = Words(1000, kWords);
  const std::vector<uint32_t> half = Words(2000, kWords / 2);
  bool ok = cuMemcpyHtoD(buffers[0], whole.data(), kBuffer) == CUDA_SUCCESS &&
            cuMemcpyDtoD(buffers[1], buffers[3], kBuffer) == CUDA_SUCCESS &&
            cuMemcpyHtoDAsync(buffers[2] + kBuffer / 2, half.data(), kBuffer / 2, stream) ==
                CUDA_SUCCESS &&
            cuStreamSynchronize(stream) == CUDA_SUCCESS;
  expected[0] = Expected(1000, kWords);
  expected[1] = Expected(3, kWords);
  expected[2] = Expected(2, kWords / 2) + Expected(2000, kWords / 2);

  for (int b = 0; ok && b < count; ++b) {
    uint64_t words = kWords;
    CUdeviceptr out = sums + b * sizeof(uint64_t);
    void* params[] = {&buffers[b], &words, &out};
    ok = cuLaunchKernel(sum, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) == CUDA_SUCCESS;
  }
  ok = ok && cuCtxSynchronize() == CUDA_SUCCESS;
  int wrong = 0;
  const auto* results = reinterpret_cast<const uint64_t*>(sums);
  for (int b = 0; ok && b < count; ++b) wrong += results[b] != expected[b] ? 1 : 0;
  std::printf("copies_wrong=%d\n", ok ? wrong : -1);
  for (const CUdeviceptr buffer : buffers) cuMemFree(buffer);
  cuMemFree(sums);
  cuStreamDestroy(stream);
  return ok && wrong == 0 ? 0 : 1;
}

int LegacyOrder(int total_mib, CUfunction fill) {
  std::vector<CUdeviceptr> buffers;
  if (!AllocateFilled(total_mib / 4, fill, &buffers)) return 1;
  if (cuCtxSynchronize() != CUDA_SUCCESS) return 1;  // the fills and evictions are done
  struct Read {
    const uint32_t* words;
    uint64_t sum = 0;
  } read{reinterpret_cast<const uint32_t*>(buffers[0])};
  const auto late_read = [](void* arg) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto* r = static_cast<Read*>(arg);
    for (uint64_t i = 0; i < kWords; ++i) r->sum += r->words[i];
  };
  const uint64_t from = (1ull << 20) / 4;
  const bool ok = cuLaunchHostFunc(nullptr, late_read, &read) == CUDA_SUCCESS &&
                  cuMemsetD32(buffers[0] + from * 4, 7, kWords - from) == CUDA_SUCCESS &&
                  cuCtxSynchronize() == CUDA_SUCCESS;
  std::printf("legacy_order_wrong=%d\n", ok ? (read.sum != Expected(0, kWords) ? 1 : 0) : -1);
  for (const CUdeviceptr buffer : buffers) cuMemFree(buffer);
  return ok && read.sum == Expected(0, kWords) ? 0 : 1;
}
