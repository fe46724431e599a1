// The child-process half of simgpu_test: each scenario sets up simgpu under the configuration
// its parent test chose, does its work and exits; the parent reads the stats file and stdout.
#include "scenarios.h"

#include <cuda.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

namespace {

constexpr size_t kChunk = size_t{2} << 20;

#define REQUIRE(cond)                                                                  \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "scenario check failed at line %d: %s\n", __LINE__, #cond); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define REQUIRE_OK(call) REQUIRE((call) == CUDA_SUCCESS)

struct Kernels {
  CUmodule module = nullptr;
  CUfunction touch = nullptr, follow = nullptr, timed = nullptr, sum = nullptr;
};

Kernels Setup() {
  REQUIRE_OK(cuInit(0));
  CUcontext ctx = nullptr;
  REQUIRE_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
  REQUIRE_OK(cuCtxSetCurrent(ctx));
  Kernels k;
  REQUIRE_OK(cuModuleLoad(&k.module, SIMGPU_TEST_KERNELS));
  REQUIRE_OK(cuModuleGetFunction(&k.touch, k.module, "touch_chunks"));
  REQUIRE_OK(cuModuleGetFunction(&k.follow, k.module, "follow_pointers"));
  REQUIRE_OK(cuModuleGetFunction(&k.timed, k.module, "timed"));
  REQUIRE_OK(cuModuleGetFunction(&k.sum, k.module, "sum_u32"));
  return k;
}

// Touches `count` chunks of `base`, `stride` chunks apart, from a kernel on `stream`.
void Touch(const Kernels& k, CUdeviceptr base, uint64_t first_chunk, uint64_t stride_chunks,
           uint32_t count, CUstream stream = nullptr) {
  char* p = reinterpret_cast<char*>(base) + first_chunk * kChunk;
  uint64_t stride = stride_chunks * kChunk;
  void* args[] = {&p, &stride, &count};
  REQUIRE_OK(cuLaunchKernel(k.touch, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr));
  REQUIRE_OK(cuStreamSynchronize(stream));
}

CUmemLocation Device() {
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = 0;
  return loc;
}

CUmemLocation Host() {
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_HOST;
  return loc;
}

// 16 chunks; a kernel touches 4 of them (every third): 4 faults, not 16.
void FaultsPartial() {
  Kernels k = Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 16 * kChunk, CU_MEM_ATTACH_GLOBAL));
  Touch(k, m, 0, 3, 4);
  Touch(k, m, 0, 3, 4);  // resident now: no new faults
}

// A kernel follows pointers stored in device memory to chunks 1 and 5 of a managed allocation.
void FaultsPointerChase() {
  Kernels k = Setup();
  CUdeviceptr m, table;
  REQUIRE_OK(cuMemAllocManaged(&m, 8 * kChunk, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAlloc(&table, 2 * sizeof(char*)));
  char* ptrs[2] = {reinterpret_cast<char*>(m) + 1 * kChunk + 17,
                   reinterpret_cast<char*>(m) + 5 * kChunk + 3};
  REQUIRE_OK(cuMemcpyHtoD(table, ptrs, sizeof(ptrs)));
  char** t = reinterpret_cast<char**>(table);
  uint32_t n = 2;
  void* args[] = {&t, &n};
  REQUIRE_OK(cuLaunchKernel(k.follow, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  REQUIRE_OK(cuCtxSynchronize());
  char out[2];
  REQUIRE_OK(cuMemcpyDtoH(&out[0], m + 1 * kChunk + 17, 1));
  REQUIRE_OK(cuMemcpyDtoH(&out[1], m + 5 * kChunk + 3, 1));
  REQUIRE(out[0] == 1 && out[1] == 1);
}

// Capacity 4 chunks. A(2) B(2) C(2) managed; touching C0 evicts A0 (oldest resident), then A1,
// B0, B1 are still resident; touching A0 again faults and evicts A1.
void EvictionOrder() {
  Kernels k = Setup();
  CUdeviceptr a, b, c;
  REQUIRE_OK(cuMemAllocManaged(&a, 2 * kChunk, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAllocManaged(&b, 2 * kChunk, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAllocManaged(&c, 2 * kChunk, CU_MEM_ATTACH_GLOBAL));
  Touch(k, a, 0, 1, 2);
  Touch(k, b, 0, 1, 2);
  Touch(k, c, 0, 1, 1);  // fault 5, evicts A0
  Touch(k, a, 1, 1, 1);  // A1 still resident
  Touch(k, b, 0, 1, 2);  // B still resident
  Touch(k, c, 0, 1, 1);  // C0 resident
  Touch(k, a, 0, 1, 1);  // fault 6, evicts A1
  Touch(k, b, 0, 1, 2);  // B still resident
}

// Capacity 4 chunks, one allocation of 6, a context synchronize after each phase: chunks 0-3 fill
// the device (four faults, two kernels); chunk 4 evicts chunk 0; chunk 0 evicts chunk 1. The stats
// note the counters at each synchronize.
void ContextSyncs() {
  Kernels k = Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 6 * kChunk, CU_MEM_ATTACH_GLOBAL));
  for (const uint64_t first : {0, 2}) Touch(k, m, first, 1, 2);
  REQUIRE_OK(cuCtxSynchronize());
  for (const uint64_t chunk : {4, 0}) {
    Touch(k, m, chunk, 1, 1);
    REQUIRE_OK(cuCtxSynchronize());
  }
}

// Capacity 256 KiB. Three managed allocations of 100 KiB (25 pages each: nvidia-uvm backs a range
// that fills part of a 2 MiB block with 64 KiB and 4 KiB chunks) fit two at a time: touching the
// third evicts the first, only its 100 KiB. Then one of 2 MiB + 10 KiB, of which the 10 KiB in its
// second chunk are prefetched: 12 KiB come in, beside the two small ones.
void SmallPieces() {
  Kernels k = Setup();
  constexpr size_t kSmall = 100 << 10;
  CUdeviceptr a, b, c, big;
  REQUIRE_OK(cuMemAllocManaged(&a, kSmall, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAllocManaged(&b, kSmall, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAllocManaged(&c, kSmall, CU_MEM_ATTACH_GLOBAL));
  Touch(k, a, 0, 1, 1);
  Touch(k, b, 0, 1, 1);
  Touch(k, c, 0, 1, 1);  // evicts a
  Touch(k, b, 0, 1, 1);  // still resident
  size_t free_bytes = 0, total_bytes = 0;
  REQUIRE_OK(cuMemGetInfo(&free_bytes, &total_bytes));
  std::printf("free_after_small=%zu\n", free_bytes);
  REQUIRE_OK(cuMemAllocManaged(&big, kChunk + (10 << 10), CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemPrefetchAsync(big + kChunk, 10 << 10, Device(), 0, nullptr));
  REQUIRE_OK(cuStreamSynchronize(nullptr));
  for (CUdeviceptr p : {a, b, c, big}) REQUIRE_OK(cuMemFree(p));
}

// Prefetch 8 chunks (written by the host first, so they hold data to copy) on one stream while a
// 1 ms kernel runs on another: the copy engine overlaps compute; then no kernel faults.
void PrefetchOverlap() {
  Kernels k = Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 8 * kChunk, CU_MEM_ATTACH_GLOBAL));
  std::memset(reinterpret_cast<void*>(m), 1, 8 * kChunk);
  CUstream s1, s2;
  REQUIRE_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  REQUIRE_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent k0, k1, p0, p1;
  for (CUevent* e : {&k0, &k1, &p0, &p1}) REQUIRE_OK(cuEventCreate(e, 0));
  double secs = 1e-3;
  void* args[] = {&secs};
  REQUIRE_OK(cuEventRecord(k0, s1));
  REQUIRE_OK(cuLaunchKernel(k.timed, 1, 1, 1, 1, 1, 1, 0, s1, args, nullptr));
  REQUIRE_OK(cuEventRecord(k1, s1));
  REQUIRE_OK(cuEventRecord(p0, s2));
  REQUIRE_OK(cuMemPrefetchAsync(m, 8 * kChunk, Device(), 0, s2));
  REQUIRE_OK(cuEventRecord(p1, s2));
  REQUIRE_OK(cuCtxSynchronize());
  float kernel_ms = 0, prefetch_ms = 0, k0_to_p1 = 0;
  REQUIRE_OK(cuEventElapsedTime(&kernel_ms, k0, k1));
  REQUIRE_OK(cuEventElapsedTime(&prefetch_ms, p0, p1));
  REQUIRE_OK(cuEventElapsedTime(&k0_to_p1, k0, p1));
  std::printf("kernel_ms=%.6f\nprefetch_ms=%.6f\nk0_to_p1_ms=%.6f\n", kernel_ms, prefetch_ms,
              k0_to_p1);
  Touch(k, m, 0, 1, 8);
}

// A thread's host clock (SIMGPU_CALIBRATION's call costs): another thread's blocked call does not
// delay this thread's launch (b_then_main_ms: the launch's own cost + the kernel's 1 ms); after a
// synchronization (the host clock reaches the device's), a prefetch of data already resident
// delays the next launch by its own blocking cost and the launch's (after_sync_ms).
void HostClock() {
  Kernels k = Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, kChunk, CU_MEM_ATTACH_GLOBAL));
  CUstream s1;
  REQUIRE_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  REQUIRE_OK(cuMemPrefetchAsync(m, kChunk, Device(), 0, s1));
  CUevent e[4];
  for (CUevent& x : e) REQUIRE_OK(cuEventCreate(&x, 0));
  double secs = 1e-3;
  void* args[] = {&secs};
  CUcontext ctx = nullptr;
  REQUIRE_OK(cuCtxGetCurrent(&ctx));
  std::thread other([&] {
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    CUstream s2;
    REQUIRE_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuMemPrefetchAsync(m, kChunk, Device(), 0, s2));
    REQUIRE_OK(cuStreamDestroy(s2));
  });
  other.join();
  REQUIRE_OK(cuEventRecord(e[0], s1));
  REQUIRE_OK(cuLaunchKernel(k.timed, 1, 1, 1, 1, 1, 1, 0, s1, args, nullptr));
  REQUIRE_OK(cuEventRecord(e[1], s1));
  REQUIRE_OK(cuStreamSynchronize(s1));
  REQUIRE_OK(cuEventRecord(e[2], s1));
  REQUIRE_OK(cuMemPrefetchAsync(m, kChunk, Device(), 0, s1));
  REQUIRE_OK(cuLaunchKernel(k.timed, 1, 1, 1, 1, 1, 1, 0, s1, args, nullptr));
  REQUIRE_OK(cuEventRecord(e[3], s1));
  REQUIRE_OK(cuStreamSynchronize(s1));
  float first = 0, second = 0;
  REQUIRE_OK(cuEventElapsedTime(&first, e[0], e[1]));
  REQUIRE_OK(cuEventElapsedTime(&second, e[2], e[3]));
  std::printf("b_then_main_ms=%.6f\nafter_sync_ms=%.6f\n", first, second);
}

// Touch 4 chunks, discard them (no copy-back), touch again: 8 faults, nothing evicted. The batch
// calls refuse the legacy NULL stream (as a null handle and as CU_STREAM_LEGACY), for the
// prefetch batch too; the per-thread default stream is taken.
void DiscardScenario() {
  Kernels k = Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 4 * kChunk, CU_MEM_ATTACH_GLOBAL));
  Touch(k, m, 0, 1, 4);
  CUdeviceptr ptrs[] = {m};
  size_t sizes[] = {4 * kChunk};
  CUmemLocation loc = Device();
  size_t idx = 0;
  int legacy_ok = 0;
  for (CUstream legacy : {static_cast<CUstream>(nullptr), CU_STREAM_LEGACY}) {
    legacy_ok += cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, legacy) == CUDA_SUCCESS;
    legacy_ok += cuMemPrefetchBatchAsync(ptrs, sizes, 1, &loc, &idx, 1, 0, legacy) == CUDA_SUCCESS;
    legacy_ok +=
        cuMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 1, &loc, &idx, 1, 0, legacy) == CUDA_SUCCESS;
  }
  std::printf("legacy_accepted=%d\n", legacy_ok);
  REQUIRE_OK(cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, CU_STREAM_PER_THREAD));
  REQUIRE_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  Touch(k, m, 0, 1, 4);
  // Discard-and-prefetch to the device: resident again without a transfer or a fault.
  REQUIRE_OK(cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, CU_STREAM_PER_THREAD));
  REQUIRE_OK(
      cuMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 1, &loc, &idx, 1, 0, CU_STREAM_PER_THREAD));
  REQUIRE_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  Touch(k, m, 0, 1, 4);
}

// A discard forgets the range's contents, wherever the data is: 4 chunks filled by the host, the
// first two then made resident on the device, one discard over bytes 100 .. 3 chunks + 4100. The
// whole pages inside the range read as zeroes (in the resident and in the host chunks), every
// byte outside it keeps the fill.
void DiscardContents() {
  Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 4 * kChunk, CU_MEM_ATTACH_GLOBAL));
  auto* bytes = reinterpret_cast<unsigned char*>(m);
  std::memset(bytes, 0xA5, 4 * kChunk);
  REQUIRE_OK(cuMemPrefetchAsync(m, 2 * kChunk, Device(), 0, nullptr));
  const uint64_t from = 100, to = 3 * kChunk + 4100, page = 4096;
  CUdeviceptr ptrs[] = {m + from};
  size_t sizes[] = {to - from};
  REQUIRE_OK(cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, CU_STREAM_PER_THREAD));
  REQUIRE_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  uint64_t zero_inside = 0, kept_outside = 0;
  const uint64_t first_page = (from + page - 1) / page * page, last_page = to / page * page;
  for (uint64_t i = 0; i < 4 * kChunk; ++i) {
    if (i >= first_page && i < last_page) zero_inside += bytes[i] == 0 ? 1 : 0;
    if (i < from || i >= to) kept_outside += bytes[i] == 0xA5 ? 1 : 0;
  }
  std::printf("whole_pages_inside=%llu\nzero_inside=%llu\n",
              static_cast<unsigned long long>(last_page - first_page),
              static_cast<unsigned long long>(zero_inside));
  std::printf("outside=%llu\nkept_outside=%llu\n",
              static_cast<unsigned long long>(4 * kChunk - (to - from)),
              static_cast<unsigned long long>(kept_outside));
}

// A residency call's range must be managed memory throughout: across two adjacent managed
// allocations it is; past the end of a 1 MiB one (into the rest of its chunk, where nothing is
// allocated) or into device memory it is refused, and nothing is moved or forgotten.
void ManagedRanges() {
  Setup();
  CUdeviceptr a, b, small, device;
  REQUIRE_OK(cuMemAllocManaged(&a, 2 * kChunk, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAllocManaged(&b, 2 * kChunk, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAllocManaged(&small, kChunk / 2, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAlloc(&device, kChunk));
  std::memset(reinterpret_cast<void*>(small), 0x5A, kChunk / 2);
  const auto prefetch = [](CUdeviceptr p, size_t n) {
    return static_cast<int>(cuMemPrefetchAsync(p, n, Device(), 0, nullptr));
  };
  const auto discard = [](CUdeviceptr p, size_t n) {
    CUdeviceptr ptrs[] = {p};
    size_t sizes[] = {n};
    return static_cast<int>(cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, CU_STREAM_PER_THREAD));
  };
  std::printf("adjacent=%d\n", b == a + 2 * kChunk ? 1 : 0);
  std::printf("across_two=%d\n", prefetch(a, 4 * kChunk));
  std::printf("past_the_end=%d\n", prefetch(small, kChunk));
  std::printf("discard_past_the_end=%d\n", discard(small, kChunk));
  std::printf("into_device=%d\n", prefetch(device, 4096));
  std::printf("whole_small=%d\n", discard(small, kChunk / 2));
  REQUIRE_OK(cuCtxSynchronize());
  std::printf("small_forgotten=%d\n", *reinterpret_cast<unsigned char*>(small) == 0 ? 1 : 0);
}

// Chunks that hold no data are populated on the device without a transfer: a prefetch of 4 fresh
// chunks takes no time; a kernel faulting 2 fresh chunks pays the fault latency only. After an
// eviction (data copied back) the prefetch copies; after a discard it does not.
void ZeroFill() {
  Kernels k = Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 6 * kChunk, CU_MEM_ATTACH_GLOBAL));
  CUevent e0, e1;
  for (CUevent* e : {&e0, &e1}) REQUIRE_OK(cuEventCreate(e, 0));
  const auto timed = [&](const std::function<void()>& work) {
    REQUIRE_OK(cuEventRecord(e0, nullptr));
    work();
    REQUIRE_OK(cuEventRecord(e1, nullptr));
    REQUIRE_OK(cuCtxSynchronize());
    float ms = 0;
    REQUIRE_OK(cuEventElapsedTime(&ms, e0, e1));
    return ms;
  };
  const auto prefetch = [&](CUmemLocation where) {
    REQUIRE_OK(cuMemPrefetchAsync(m, 4 * kChunk, where, 0, nullptr));
  };
  std::printf("fresh_prefetch_ms=%.6f\n", timed([&] { prefetch(Device()); }));
  std::printf("fresh_fault_ms=%.6f\n", timed([&] { Touch(k, m, 4, 1, 2); }));
  Touch(k, m, 0, 1, 4);  // resident: no faults
  std::printf("evict_ms=%.6f\n", timed([&] { prefetch(Host()); }));
  std::printf("copy_prefetch_ms=%.6f\n", timed([&] { prefetch(Device()); }));
  CUdeviceptr ptrs[] = {m};
  size_t sizes[] = {4 * kChunk};
  REQUIRE_OK(cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, CU_STREAM_PER_THREAD));
  REQUIRE_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  std::printf("discarded_prefetch_ms=%.6f\n", timed([&] { prefetch(Device()); }));
}

// Prefetch to the host evicts (copy-back counted); the next kernel faults again.
void PrefetchHost() {
  Kernels k = Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 2 * kChunk, CU_MEM_ATTACH_GLOBAL));
  Touch(k, m, 0, 1, 2);
  REQUIRE_OK(cuMemPrefetchAsync(m, 2 * kChunk, Host(), 0, nullptr));
  Touch(k, m, 0, 1, 2);
}

// 3x capacity of managed memory, all touched: works, resident never exceeds capacity.
void Oversubscribe() {
  Kernels k = Setup();
  size_t total = 0, free = 0;
  REQUIRE_OK(cuMemGetInfo(&free, &total));
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 3 * total, CU_MEM_ATTACH_GLOBAL));
  uint32_t chunks = static_cast<uint32_t>(3 * total / kChunk);
  Touch(k, m, 0, 1, chunks);
  REQUIRE_OK(cuMemGetInfo(&free, &total));
  REQUIRE(free == 0);
  std::printf("chunks=%u\n", chunks);
}

// The host writes managed memory (no device fault), a kernel reads it (faults: re-armed) and
// sees the host's values.
void HostAccess() {
  Kernels k = Setup();
  CUdeviceptr m, out;
  const uint64_t n = 4 * kChunk / sizeof(uint32_t);
  REQUIRE_OK(cuMemAllocManaged(&m, 4 * kChunk, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAllocManaged(&out, sizeof(uint64_t), CU_MEM_ATTACH_GLOBAL));
  uint32_t* p = reinterpret_cast<uint32_t*>(m);
  for (uint64_t i = 0; i < n; ++i) p[i] = 1;
  const uint32_t* src = p;
  uint64_t count = n;
  uint64_t* dst = reinterpret_cast<uint64_t*>(out);
  void* args[] = {&src, &count, &dst};
  REQUIRE_OK(cuLaunchKernel(k.sum, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  REQUIRE_OK(cuCtxSynchronize());
  REQUIRE(*dst == n);  // host read of a device-resident chunk: no migration back
}

// Preferred location host: the device maps the chunk remotely instead of migrating it.
void PreferHost() {
  Kernels k = Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 2 * kChunk, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAdvise(m, kChunk, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, Host()));
  Touch(k, m, 0, 1, 2);  // chunk 0 remote, chunk 1 faults
}

void NotInitialized() {
  CUdeviceptr p;
  REQUIRE(cuMemAlloc(&p, 16) == CUDA_ERROR_NOT_INITIALIZED);
  int n = 0;
  REQUIRE(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
  REQUIRE_OK(cuInit(0));
  REQUIRE_OK(cuDeviceGetCount(&n));
  REQUIRE(n == 1);
  REQUIRE(cuMemAlloc(&p, 16) == CUDA_ERROR_INVALID_CONTEXT);
}

// Device allocations fill the capacity: resident managed chunks are evicted to make room.
void DeviceAllocEvicts() {
  Kernels k = Setup();
  CUdeviceptr m, d;
  REQUIRE_OK(cuMemAllocManaged(&m, 4 * kChunk, CU_MEM_ATTACH_GLOBAL));
  Touch(k, m, 0, 1, 4);                    // capacity is 4 chunks: all resident
  REQUIRE_OK(cuMemAlloc(&d, 2 * kChunk));  // evicts 2 managed chunks
  size_t free = 0, total = 0;
  REQUIRE_OK(cuMemGetInfo(&free, &total));
  REQUIRE(free == 0);
  REQUIRE(cuMemAlloc(&d, 3 * kChunk) == CUDA_ERROR_OUT_OF_MEMORY);  // 2 + 3 > 4
}

// While another thread captures a blocking stream (thread-local mode), the legacy stream is
// unusable: a prefetch on it fails with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and breaks that
// capture; asking whether it captures fails the same way but breaks nothing. A capture of a
// non-blocking stream leaves the legacy stream alone.
void LegacyDuringCapture() {
  Kernels k = Setup();
  CUcontext ctx = nullptr;
  REQUIRE_OK(cuCtxGetCurrent(&ctx));
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, kChunk, CU_MEM_ATTACH_GLOBAL));
  for (const unsigned flags : {CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING}) {
    const char* kind = flags == CU_STREAM_DEFAULT ? "blocking" : "separate";
    CUstream captured;
    REQUIRE_OK(cuStreamCreate(&captured, flags));
    std::atomic<int> stage{0};
    CUresult ended = CUDA_SUCCESS;
    std::thread capturer([&] {
      REQUIRE_OK(cuCtxSetCurrent(ctx));
      REQUIRE_OK(cuStreamBeginCapture(captured, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      stage = 1;
      while (stage.load() != 2) std::this_thread::yield();
      CUgraph graph = nullptr;
      ended = cuStreamEndCapture(captured, &graph);
      if (graph != nullptr) cuGraphDestroy(graph);
    });
    while (stage.load() != 1) std::this_thread::yield();
    CUstreamCaptureStatus status;
    std::printf("%s_query=%d\n", kind,
                static_cast<int>(cuStreamIsCapturing(CU_STREAM_LEGACY, &status)));
    std::printf("%s_prefetch=%d\n", kind,
                static_cast<int>(cuMemPrefetchAsync(m, kChunk, Device(), 0, CU_STREAM_LEGACY)));
    char* p = reinterpret_cast<char*>(m);
    uint64_t stride = kChunk;
    uint32_t count = 1;
    void* args[] = {&p, &stride, &count};
    std::printf("%s_launch=%d\n", kind,
                static_cast<int>(
                    cuLaunchKernel(k.touch, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_LEGACY, args, nullptr)));
    CUdeviceptr async = 0;
    const CUresult allocated = cuMemAllocAsync(&async, 4096, CU_STREAM_LEGACY);
    std::printf("%s_alloc_async=%d\n", kind, static_cast<int>(allocated));
    stage = 2;
    capturer.join();
    std::printf("%s_capture_end=%d\n", kind, static_cast<int>(ended));
    if (allocated == CUDA_SUCCESS) REQUIRE_OK(cuMemFreeAsync(async, CU_STREAM_LEGACY));
    REQUIRE_OK(cuCtxSynchronize());
    REQUIRE_OK(cuStreamDestroy(captured));
  }
}

// A kernel on one stream sums a managed buffer the host filled; a discard of the buffer on a
// second stream, not ordered after the kernel, is enqueued right after it. With kernels held
// (SIMGPU_HOLD_KERNEL_US) the discard runs first and the kernel sums zeroes, as on a GPU where
// the kernel would still be computing; the same with an event ordering the discard after the
// kernel sums the fill.
void KernelHold() {
  Kernels k = Setup();
  constexpr uint64_t kWords = kChunk / 4;
  CUdeviceptr m, out;
  REQUIRE_OK(cuMemAllocManaged(&m, kChunk, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuMemAllocManaged(&out, sizeof(uint64_t), CU_MEM_ATTACH_GLOBAL));
  CUstream s1, s2;
  REQUIRE_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  REQUIRE_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent done;
  REQUIRE_OK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  for (const bool ordered : {false, true}) {
    auto* words = reinterpret_cast<uint32_t*>(m);
    for (uint64_t i = 0; i < kWords; ++i) words[i] = 1;
    uint64_t n = kWords;
    void* args[] = {&m, &n, &out};
    REQUIRE_OK(cuLaunchKernel(k.sum, 1, 1, 1, 1, 1, 1, 0, s1, args, nullptr));
    if (ordered) {
      REQUIRE_OK(cuEventRecord(done, s1));
      REQUIRE_OK(cuStreamWaitEvent(s2, done, 0));
    }
    CUdeviceptr ptrs[] = {m};
    size_t sizes[] = {kChunk};
    REQUIRE_OK(cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, s2));
    REQUIRE_OK(cuCtxSynchronize());
    std::printf("%s_sum=%llu\n", ordered ? "waited" : "overtaken",
                static_cast<unsigned long long>(*reinterpret_cast<uint64_t*>(out)));
  }
}

// An event is recorded only on its own context's streams (cuda.h: else CUDA_ERROR_INVALID_HANDLE),
// the default streams being the current context's; a stream may wait for another context's event;
// cuCtxSynchronize waits for the current context's work only.
void EventContexts() {
  Setup();
  CUcontext ctx0 = nullptr, ctx1 = nullptr;
  REQUIRE_OK(cuCtxGetCurrent(&ctx0));
  REQUIRE_OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
  CUevent e0;
  CUstream s0;
  REQUIRE_OK(cuEventCreate(&e0, CU_EVENT_DISABLE_TIMING));
  REQUIRE_OK(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
  REQUIRE_OK(cuCtxSetCurrent(ctx1));
  CUstream s1;
  REQUIRE_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  std::printf("on_other_stream=%d\n", static_cast<int>(cuEventRecord(e0, s1)));
  std::printf("on_other_legacy=%d\n", static_cast<int>(cuEventRecord(e0, nullptr)));
  std::printf("on_own_stream=%d\n", static_cast<int>(cuEventRecord(e0, s0)));
  std::printf("wait_across=%d\n", static_cast<int>(cuStreamWaitEvent(s1, e0, 0)));
  REQUIRE_OK(cuCtxSetCurrent(ctx0));
  std::printf("on_own_legacy=%d\n", static_cast<int>(cuEventRecord(e0, nullptr)));
  REQUIRE_OK(cuCtxSynchronize());

  // cuCtxSynchronize waits for the current context's work only: with a host function on the
  // other context's stream held until a flag is set (at most 5 s), it returns first.
  static std::atomic<bool> release{false};
  static std::atomic<bool> released_by_flag{false};
  REQUIRE_OK(cuLaunchHostFunc(
      s1,
      [](void*) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!release.load() && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        released_by_flag = release.load();
      },
      nullptr));
  REQUIRE_OK(cuCtxSynchronize());  // ctx0's
  release = true;
  REQUIRE_OK(cuStreamSynchronize(s1));
  std::printf("other_context_waited_for=%d\n", released_by_flag.load() ? 0 : 1);
}

// SIMGPU_DEVICES=2, 4 chunks each: capacities are separate, faults land on the kernel's device
// and a prefetch to the other device moves the chunks.
void TwoDevices() {
  Kernels k = Setup();
  int count = 0;
  REQUIRE_OK(cuDeviceGetCount(&count));
  REQUIRE(count == 2);
  CUcontext ctx0 = nullptr, ctx1 = nullptr;
  REQUIRE_OK(cuCtxGetCurrent(&ctx0));
  REQUIRE_OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
  REQUIRE(ctx0 != ctx1);
  CUdeviceptr d0, m;
  REQUIRE_OK(cuMemAlloc(&d0, 4 * kChunk));  // device 0 is full
  size_t free = 0, total = 0;
  REQUIRE_OK(cuMemGetInfo(&free, &total));
  REQUIRE(free == 0);
  REQUIRE_OK(cuCtxSetCurrent(ctx1));
  REQUIRE_OK(cuMemGetInfo(&free, &total));
  REQUIRE(free == 4 * kChunk);
  int ordinal = -1;
  REQUIRE_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d0));
  REQUIRE(ordinal == 0);
  REQUIRE_OK(cuMemAllocManaged(&m, 2 * kChunk, CU_MEM_ATTACH_GLOBAL));
  Touch(k, m, 0, 1, 2);  // faults onto device 1: nothing to evict, nothing over capacity
  REQUIRE_OK(cuMemGetInfo(&free, &total));
  REQUIRE(free == 2 * kChunk);
  REQUIRE_OK(cuCtxSetCurrent(ctx0));
  REQUIRE_OK(cuMemFree(d0));
  CUmemLocation device0 = Device();
  REQUIRE_OK(cuMemPrefetchAsync(m, 2 * kChunk, device0, 0, nullptr));
  REQUIRE_OK(cuCtxSynchronize());
  REQUIRE_OK(cuMemGetInfo(&free, &total));
  REQUIRE(free == 2 * kChunk);  // the chunks moved to device 0
  REQUIRE_OK(cuCtxSetCurrent(ctx1));
  REQUIRE_OK(cuMemGetInfo(&free, &total));
  REQUIRE(free == 4 * kChunk);  // and left device 1
  REQUIRE(cuDevicePrimaryCtxRetain(&ctx1, 2) == CUDA_ERROR_INVALID_DEVICE);
}

// SIMGPU_DEVICES=2, 4 chunks each: each device has its own default pool; cuMemAllocAsync takes
// from the current pool of its stream's device, and an allocation from a pool lies on the pool's
// device whatever context is current.
void DevicePools() {
  Setup();
  CUcontext ctx0 = nullptr, ctx1 = nullptr;
  REQUIRE_OK(cuCtxGetCurrent(&ctx0));
  REQUIRE_OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
  CUmemoryPool pool0 = nullptr, pool1 = nullptr, by_location = nullptr;
  REQUIRE_OK(cuDeviceGetDefaultMemPool(&pool0, 0));
  REQUIRE_OK(cuDeviceGetDefaultMemPool(&pool1, 1));
  CUmemLocation device1{};
  device1.type = CU_MEM_LOCATION_TYPE_DEVICE;
  device1.id = 1;
  REQUIRE_OK(cuMemGetDefaultMemPool(&by_location, &device1, CU_MEM_ALLOCATION_TYPE_PINNED));
  std::printf("pools_differ=%d\n", pool0 != pool1 ? 1 : 0);
  std::printf("by_location_is_device1=%d\n", by_location == pool1 ? 1 : 0);
  std::printf("set_other_devices_pool=%d\n", static_cast<int>(cuDeviceSetMemPool(0, pool1)));
  REQUIRE_OK(cuCtxSetCurrent(ctx1));
  CUstream s1 = nullptr;
  REQUIRE_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  REQUIRE_OK(cuCtxSetCurrent(ctx0));
  CUdeviceptr a = 0, b = 0;
  REQUIRE_OK(cuMemAllocAsync(&a, 2 * kChunk, s1));  // device 1's stream, device 0 current
  REQUIRE_OK(cuMemAllocFromPoolAsync(&b, kChunk, pool1, nullptr));
  REQUIRE_OK(cuCtxSynchronize());
  int ordinal_a = -1, ordinal_b = -1;
  REQUIRE_OK(cuPointerGetAttribute(&ordinal_a, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
  REQUIRE_OK(cuPointerGetAttribute(&ordinal_b, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b));
  std::printf("async_device=%d\nfrom_pool_device=%d\n", ordinal_a, ordinal_b);
  cuuint64_t used0 = 0, used1 = 0;
  REQUIRE_OK(cuMemPoolGetAttribute(pool0, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used0));
  REQUIRE_OK(cuMemPoolGetAttribute(pool1, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used1));
  std::printf("pool0_used_chunks=%llu\npool1_used_chunks=%llu\n",
              static_cast<unsigned long long>(used0 / kChunk),
              static_cast<unsigned long long>(used1 / kChunk));
  size_t free0 = 0, free1 = 0, total = 0;
  REQUIRE_OK(cuMemGetInfo(&free0, &total));
  REQUIRE_OK(cuCtxSetCurrent(ctx1));
  REQUIRE_OK(cuMemGetInfo(&free1, &total));
  std::printf("device0_free_chunks=%zu\ndevice1_free_chunks=%zu\n", free0 / kChunk, free1 / kChunk);
  REQUIRE_OK(cuMemFreeAsync(a, s1));
  REQUIRE_OK(cuMemFreeAsync(b, s1));
  REQUIRE_OK(cuStreamSynchronize(s1));
}

void NoCoreDumps() {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

// A use after free of device memory is still a crash: simgpu's handler passes it on.
void WildAccess() {
  NoCoreDumps();
  Setup();
  CUdeviceptr d;
  REQUIRE_OK(cuMemAlloc(&d, 4096));
  REQUIRE_OK(cuMemFree(d));
  *reinterpret_cast<volatile char*>(d) = 1;
  std::printf("scenario survived\n");
}

void ExitFromHandler(int, siginfo_t*, void*) { _exit(42); }

// A SIGSEGV handler installed before cuInit still gets the faults that are not simgpu's, and
// simgpu's managed memory keeps working.
void ChainedHandler() {
  NoCoreDumps();
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = ExitFromHandler;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, nullptr);
  Kernels k = Setup();
  CUdeviceptr m;
  REQUIRE_OK(cuMemAllocManaged(&m, 2 * kChunk, CU_MEM_ATTACH_GLOBAL));
  reinterpret_cast<char*>(m)[0] = 5;  // host access to managed memory: handled by simgpu
  Touch(k, m, 0, 1, 2);
  REQUIRE(reinterpret_cast<char*>(m)[0] == 6);
  void* guard = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(guard != MAP_FAILED);
  *static_cast<volatile char*>(guard) = 1;  // not simgpu's: goes to the handler above
  std::printf("scenario survived\n");
}

// Streams finish their queued work without an explicit synchronize; the stats file still
// reports the kernel (written at exit).
void Plain() { Setup(); }

// With SIMGPU_QUEUE_DEPTH=4: a stream whose device is held by a host function takes 4 more
// operations; the thread enqueuing a fifth waits until the device goes on. Prints how many a
// second thread had enqueued while the device was held (`held`) and in the end (`enqueued`).
void QueueDepth() {
  Setup();
  CUstream stream = nullptr;
  REQUIRE_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  static std::atomic<bool> running{false}, release{false};
  REQUIRE_OK(cuLaunchHostFunc(
      stream,
      [](void*) {
        running = true;
        while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      nullptr));
  // The device has taken the host function off the queue (which is empty again) and holds.
  while (!running.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<int> enqueued{0};
  CUcontext ctx = nullptr;
  REQUIRE_OK(cuCtxGetCurrent(&ctx));
  std::thread producer([&] {
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    CUevent event = nullptr;
    REQUIRE_OK(cuEventCreate(&event, CU_EVENT_DEFAULT));
    for (int i = 0; i < 6; ++i) {
      REQUIRE_OK(cuEventRecord(event, stream));
      ++enqueued;
    }
    REQUIRE_OK(cuEventDestroy(event));
  });
  while (enqueued.load() < 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::printf("held=%d\n", enqueued.load());
  release = true;
  producer.join();
  REQUIRE_OK(cuStreamSynchronize(stream));
  std::printf("enqueued=%d\n", enqueued.load());
  REQUIRE_OK(cuStreamDestroy(stream));
}

}  // namespace

// A module and memory live as long as the context they were made in: destroying a created
// context, resetting the primary one and releasing it for the last time each unload the modules
// loaded there and free the memory allocated there; a library (context-independent) and another
// context's memory stay. Prints what cuModuleGetFunction on each module returns after each step,
// what a launch of an ended module's function returns, and what cuMemGetAddressRange says of the
// memory.
int ContextModules() {
  const Kernels k = Setup();  // k.module: loaded in the primary context, retained once
  CUlibrary library = nullptr;
  REQUIRE_OK(cuLibraryLoadFromFile(&library, SIMGPU_TEST_KERNELS, nullptr, nullptr, 0, nullptr,
                                   nullptr, 0));
  CUcontext primary = nullptr;
  REQUIRE_OK(cuCtxGetCurrent(&primary));
  // The kernels' buffer, in a context of its own that lives to the end.
  CUcontext keeper = nullptr;
  REQUIRE_OK(cuCtxCreate(&keeper, nullptr, 0, 0));
  CUdeviceptr buffer = 0;
  REQUIRE_OK(cuMemAllocManaged(&buffer, kChunk, CU_MEM_ATTACH_GLOBAL));
  REQUIRE_OK(cuCtxSetCurrent(primary));
  auto alive = [](CUdeviceptr address) {
    CUdeviceptr base = 0;
    size_t size = 0;
    return cuMemGetAddressRange(&base, &size, address);
  };
  char* p = reinterpret_cast<char*>(buffer);
  uint64_t stride = kChunk;
  uint32_t count = 1;
  void* args[] = {&p, &stride, &count};
  // A module loaded in the current context, its `touch_chunks` launched once.
  auto load = [&](CUfunction* touch) {
    CUmodule module = nullptr;
    REQUIRE_OK(cuModuleLoad(&module, SIMGPU_TEST_KERNELS));
    REQUIRE_OK(cuModuleGetFunction(touch, module, "touch_chunks"));
    REQUIRE_OK(cuLaunchKernel(*touch, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
    REQUIRE_OK(cuCtxSynchronize());
    return module;
  };
  auto print = [](const char* key, CUresult result) {
    std::printf("%s=%d\n", key, static_cast<int>(result));
  };
  auto get = [](CUmodule module) {
    CUfunction f = nullptr;
    return cuModuleGetFunction(&f, module, "touch_chunks");
  };

  CUcontext created = nullptr;
  REQUIRE_OK(cuCtxCreate(&created, nullptr, 0, 0));
  CUfunction created_touch = nullptr;
  const CUmodule in_created = load(&created_touch);
  CUdeviceptr in_created_memory = 0;
  REQUIRE_OK(cuMemAlloc(&in_created_memory, kChunk));
  REQUIRE_OK(cuCtxDestroy(created));
  REQUIRE_OK(cuCtxSetCurrent(primary));
  print("destroyed_get", get(in_created));
  print("destroyed_memory", alive(in_created_memory));
  print("destroyed_launch",
        cuLaunchKernel(created_touch, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  print("primary_after_destroy_get", get(k.module));

  CUfunction touch = nullptr;
  const CUmodule before_reset = load(&touch);
  CUdeviceptr primary_memory = 0, primary_managed = 0;
  REQUIRE_OK(cuMemAlloc(&primary_memory, kChunk));
  REQUIRE_OK(cuMemAllocManaged(&primary_managed, kChunk, CU_MEM_ATTACH_GLOBAL));
  CUcontext again = nullptr;
  REQUIRE_OK(cuDevicePrimaryCtxRetain(&again, 0));
  REQUIRE_OK(cuDevicePrimaryCtxRelease(0));  // Setup's reference is left
  print("still_retained_get", get(before_reset));
  REQUIRE_OK(cuDevicePrimaryCtxReset(0));
  print("reset_get", get(before_reset));
  print("reset_launch", cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  print("reset_setup_module_get", get(k.module));
  print("reset_memory", alive(primary_memory));
  print("reset_managed", alive(primary_managed));
  print("keeper_memory", alive(buffer));
  CUdeviceptr after_reset = 0;
  REQUIRE_OK(cuMemAlloc(&after_reset, kChunk));

  const CUmodule before_release = load(&touch);
  REQUIRE_OK(cuDevicePrimaryCtxRelease(0));  // the last reference
  print("released_get", get(before_release));
  print("released_memory", alive(after_reset));
  print("keeper_memory_at_end", alive(buffer));

  CUkernel kernel = nullptr;
  print("library_get_kernel", cuLibraryGetKernel(&kernel, library, "touch_chunks"));
  return 0;
}

int RunScenario(const std::string& name) {
  static const std::map<std::string, std::function<void()>> kScenarios = {
      {"faults_partial", FaultsPartial},
      {"faults_pointer_chase", FaultsPointerChase},
      {"eviction_order", EvictionOrder},
      {"context_syncs", ContextSyncs},
      {"small_pieces", SmallPieces},
      {"prefetch_overlap", PrefetchOverlap},
      {"host_clock", HostClock},
      {"discard", DiscardScenario},
      {"discard_contents", DiscardContents},
      {"managed_ranges", ManagedRanges},
      {"event_contexts", EventContexts},
      {"context_modules", ContextModules},
      {"kernel_hold", KernelHold},
      {"legacy_during_capture", LegacyDuringCapture},
      {"prefetch_host", PrefetchHost},
      {"zero_fill", ZeroFill},
      {"oversubscribe", Oversubscribe},
      {"host_access", HostAccess},
      {"prefer_host", PreferHost},
      {"not_initialized", NotInitialized},
      {"device_alloc_evicts", DeviceAllocEvicts},
      {"two_devices", TwoDevices},
      {"device_pools", DevicePools},
      {"plain", Plain},
      {"queue_depth", QueueDepth},
      {"wild_access", WildAccess},
      {"chained_handler", ChainedHandler},
  };
  auto it = kScenarios.find(name);
  if (it == kScenarios.end()) {
    std::fprintf(stderr, "unknown scenario %s\n", name.c_str());
    return 2;
  }
  it->second();
  std::fflush(stdout);
  return 0;
}
