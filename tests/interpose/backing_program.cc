// A driver-API program run by backing_test, with and without libspillway.so preloaded, one
// scenario per run: usage: interpose_backing_program SCENARIO KERNEL_LIBRARY [ARG]
//   async MIB      stream-ordered buffers totalling MIB (4 MiB each; half from the device's
//                  default pool by name), filled and summed by kernels, then freed stream-ordered
//   userpool       an allocation from a device pool the program created (stays device memory)
//   ipc            cuIpcGetMemHandle on a cuMemAlloc allocation
//   module LIB     cuMemAlloc from the shared library LIB (fake_nccl.cc) and from the program
//   info           one cuMemAlloc, then prints cuMemGetInfo
//   ptsz           a stream-ordered allocation on the per-thread default stream
//                  (backing_program_ptsz.cc)
//   capture        cuMemAlloc/cuMemAllocAsync while a global-mode capture is in progress, after
//                  it, beside another thread's thread-local capture and inside this thread's
//                  (also after switching itself to relaxed mode)
//   multi MIB      on each of two devices (SIMGPU_DEVICES=2), cuMemAlloc buffers totalling MIB
//                  (4 MiB each), alternating between the devices, filled and summed by kernels
//                  on a stream of each device's primary context; all freed from the first's
//   copies MIB     cuMemAlloc buffers totalling MIB (4 MiB each), filled by kernels, then some
//                  overwritten by copies and all summed (backing_program_copies.cc)
//   legacy_order MIB  the same buffers; a late host read on the legacy stream, then a memset
//                  (backing_program_copies.cc)
//   crossctx       (SIMGPU_DEVICES=2) memsets over the second device's evicted buffers, one
//                  with each device's context current, then sums and frees
//   asyncpool      on the last device (its context current), sets the device's default pool's
//                  release threshold to UINT64_MAX and turns off its opportunistic reuse, then
//                  makes a stream-ordered allocation and reports the pool that owns it
//   poolstats      a stream-ordered allocation from the default pool; then the pool's release
//                  threshold set to UINT64_MAX, the allocation freed, a high watermark reset and
//                  the pool trimmed, reading the pool's used and reserved bytes at each step
//   devicepools    (SIMGPU_DEVICES=2) stream-ordered allocations of 4 MiB on the first device and
//                  6 MiB on the second, each with its context current; then, with the first
//                  current, each device's default pool's used bytes
//   reset MIB      a 4 MiB buffer in a context of its own, filled; cuMemAlloc buffers totalling
//                  MIB (4 MiB each) filled and summed; the primary context reset
//                  (cudaDeviceReset), retained again and the kernels loaded again; a 2 MiB buffer
//                  and as many new buffers (so each old base but the first lies inside a new
//                  buffer), filled; an old buffer freed again (the driver refuses it); then the
//                  new buffers and the other context's summed
//   release MIB    the same, the primary context released for the last time instead of reset
//   destroyctx MIB the same buffers made, filled and summed in a context the job created, which
//                  it then destroys; then again in the primary context
//   jobpool        (SIMGPU_MANAGED_POOL_CREATE=0) the job's own managed pool (cuMemGetMemPool)
//                  given release threshold UINT64_MAX and an allocation; then a stream-ordered
//                  allocation, the default pool's threshold set to 0, frees, a synchronize and
//                  the default pool trimmed
//   poolrace       four threads set the default pool's release threshold to values of their own
//                  while the main thread makes the first stream-ordered allocation; then prints
//                  whether the pool that serves it ended with the default pool's threshold
// Prints one "key=value" line per fact the test checks; exits 0 when every call did what the
// scenario expects of the driver, 2 on out of memory, 1 otherwise.
#include "backing_program.h"

#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

#define CHECK_CU(call)                                                       \
  do {                                                                       \
    const CUresult r_ = (call);                                              \
    if (r_ != CUDA_SUCCESS) {                                                \
      std::printf("%s failed: %d%s\n", #call, static_cast<int>(r_),          \
                  r_ == CUDA_ERROR_OUT_OF_MEMORY ? " (out of memory)" : ""); \
      std::exit(r_ == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 1);                     \
    }                                                                        \
  } while (0)

CUfunction g_fill = nullptr;
CUfunction g_sum = nullptr;
const char* g_kernel_library = nullptr;

// Loads the kernels (again, after a context's end unloaded them).
void LoadKernels() {
  CUmodule module = nullptr;
  CHECK_CU(cuModuleLoad(&module, g_kernel_library));
  CHECK_CU(cuModuleGetFunction(&g_fill, module, "fill"));
  CHECK_CU(cuModuleGetFunction(&g_sum, module, "sum"));
}

unsigned IsManaged(CUdeviceptr pointer) {
  unsigned managed = 0;
  CHECK_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, pointer));
  return managed;
}

void Fill(CUdeviceptr buffer, uint32_t value, uint64_t words, CUstream stream) {
  void* params[] = {&buffer, &value, &words};
  CHECK_CU(cuLaunchKernel(g_fill, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
}

void Sum(CUdeviceptr buffer, uint64_t words, CUdeviceptr out, CUstream stream) {
  void* params[] = {&buffer, &words, &out};
  CHECK_CU(cuLaunchKernel(g_sum, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
}

int Async(int total_mib) {
  constexpr uint64_t kBuffer = 4ull << 20;
  constexpr uint64_t kWords = kBuffer / 4;
  const int count = total_mib / 4;
  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  CUmemoryPool default_pool = nullptr;
  CHECK_CU(cuDeviceGetDefaultMemPool(&default_pool, device));
  CUdeviceptr sums = 0;
  CHECK_CU(cuMemAllocManaged(&sums, count * sizeof(uint64_t), CU_MEM_ATTACH_GLOBAL));
  std::memset(reinterpret_cast<void*>(sums), 0, count * sizeof(uint64_t));
  std::vector<CUdeviceptr> buffers(count);
  for (int i = 0; i < count; ++i) {
    if (i % 2 == 0) {
      CHECK_CU(cuMemAllocAsync(&buffers[i], kBuffer, stream));
    } else {
      CHECK_CU(cuMemAllocFromPoolAsync(&buffers[i], kBuffer, default_pool, stream));
    }
    Fill(buffers[i], static_cast<uint32_t>(i), kWords, stream);
  }
  std::printf("first_managed=%u\n", IsManaged(buffers[0]));
  std::printf("second_managed=%u\n", IsManaged(buffers[1]));
  for (int i = 0; i < count; ++i) Sum(buffers[i], kWords, sums + i * sizeof(uint64_t), stream);
  for (int i = 0; i < count; ++i) CHECK_CU(cuMemFreeAsync(buffers[i], stream));
  CHECK_CU(cuStreamSynchronize(stream));
  const auto* results = reinterpret_cast<const uint64_t*>(sums);
  int wrong = 0;
  for (int i = 0; i < count; ++i) wrong += results[i] != Expected(i, kWords) ? 1 : 0;
  std::printf("buffers=%d wrong=%d\n", count, wrong);
  CHECK_CU(cuMemFree(sums));
  CHECK_CU(cuStreamDestroy(stream));
  return wrong == 0 ? 0 : 1;
}

int UserPool() {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  CHECK_CU(cuMemPoolCreate(&pool, &props));
  CUdeviceptr buffer = 0;
  CHECK_CU(cuMemAllocFromPoolAsync(&buffer, 1 << 20, pool, nullptr));
  std::printf("userpool_managed=%u\n", IsManaged(buffer));
  CUipcMemHandle handle;
  std::printf("ipc_result=%d\n", static_cast<int>(cuIpcGetMemHandle(&handle, buffer)));
  CHECK_CU(cuMemFreeAsync(buffer, nullptr));
  // Made the device's current pool, it is what cuMemAllocAsync allocates from: still the job's.
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  CHECK_CU(cuDeviceSetMemPool(device, pool));
  CHECK_CU(cuMemAllocAsync(&buffer, 1 << 20, nullptr));
  CUmemoryPool owner = nullptr;
  CHECK_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, buffer));
  std::printf("current_pool_managed=%u\n", IsManaged(buffer));
  std::printf("current_pool_owns=%d\n", owner == pool ? 1 : 0);
  CHECK_CU(cuMemFreeAsync(buffer, nullptr));
  // The default pool named meanwhile is still the device's: backed as before.
  CUmemoryPool default_pool = nullptr;
  CHECK_CU(cuDeviceGetDefaultMemPool(&default_pool, device));
  CHECK_CU(cuMemAllocFromPoolAsync(&buffer, 1 << 20, default_pool, nullptr));
  std::printf("default_by_name_managed=%u\n", IsManaged(buffer));
  CHECK_CU(cuMemFreeAsync(buffer, nullptr));
  CHECK_CU(cuDeviceSetMemPool(device, default_pool));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuMemPoolDestroy(pool));
  return 0;
}

// A pitched allocation whose size does not fit in 64 bits: the driver refuses it.
int PitchOverflow() {
  CUdeviceptr buffer = 0;
  size_t pitch = 0;
  const CUresult result =
      cuMemAllocPitch(&buffer, &pitch, size_t{1} << 33, (size_t{1} << 31) + 1, 4);
  std::printf("overflow_result=%d\n", static_cast<int>(result));
  CHECK_CU(cuMemAllocPitch(&buffer, &pitch, 1000, 3, 4));
  std::printf("pitch=%zu managed=%u\n", pitch, IsManaged(buffer));
  CHECK_CU(cuMemFree(buffer));
  return 0;
}

int Ipc() {
  CUdeviceptr buffer = 0;
  CHECK_CU(cuMemAlloc(&buffer, 1 << 20));
  std::printf("managed=%u\n", IsManaged(buffer));
  CUipcMemHandle handle;
  std::printf("ipc_result=%d\n", static_cast<int>(cuIpcGetMemHandle(&handle, buffer)));
  CHECK_CU(cuMemFree(buffer));
  return 0;
}

int Module(const char* library) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::printf("cannot load %s: %s\n", library, dlerror());
    return 1;
  }
  using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
  const auto fake_alloc = reinterpret_cast<AllocFn>(dlsym(handle, "FakeNcclAlloc"));
  CUdeviceptr from_library = 0;
  CUdeviceptr from_program = 0;
  CHECK_CU(fake_alloc(&from_library, 1 << 20));
  CHECK_CU(cuMemAlloc(&from_program, 1 << 20));
  std::printf("library_managed=%u\n", IsManaged(from_library));
  std::printf("program_managed=%u\n", IsManaged(from_program));
  CUipcMemHandle ipc;
  std::printf("library_ipc_result=%d\n", static_cast<int>(cuIpcGetMemHandle(&ipc, from_library)));
  CHECK_CU(cuMemFree(from_library));
  CHECK_CU(cuMemFree(from_program));
  return 0;
}

int Info() {
  CUdeviceptr buffer = 0;
  CHECK_CU(cuMemAlloc(&buffer, 1 << 20));
  size_t free_bytes = 0, total_bytes = 0;
  CHECK_CU(cuMemGetInfo(&free_bytes, &total_bytes));
  std::printf("free=%zu total=%zu\n", free_bytes, total_bytes);
  CHECK_CU(cuMemFree(buffer));
  return 0;
}

int Capture() {
  CUstream streams[3];
  for (CUstream& stream : streams) CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamBeginCapture(streams[0], CU_STREAM_CAPTURE_MODE_GLOBAL));
  // cuMemAlloc is a "potentially unsafe" call: refused during the thread's own capture.
  CUdeviceptr during = 0;
  std::printf("during_result=%d\n", static_cast<int>(cuMemAlloc(&during, 1 << 20)));
  CUdeviceptr async_during = 0;
  std::printf("async_during_result=%d\n",
              static_cast<int>(cuMemAllocAsync(&async_during, 1 << 20, streams[0])));
  CUgraph graph = nullptr;
  std::printf("end_result=%d\n", static_cast<int>(cuStreamEndCapture(streams[0], &graph)));
  CUdeviceptr after = 0;
  CHECK_CU(cuMemAlloc(&after, 1 << 20));
  std::printf("after_managed=%u\n", IsManaged(after));
  // Another thread's thread-local capture does not concern this thread's allocations.
  CUcontext context = nullptr;
  CHECK_CU(cuCtxGetCurrent(&context));
  CUresult other = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    cuCtxSetCurrent(context);
    other = cuStreamBeginCapture(streams[1], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  }).join();
  CHECK_CU(other);
  CUdeviceptr beside = 0;
  CHECK_CU(cuMemAlloc(&beside, 1 << 20));
  std::printf("beside_managed=%u\n", IsManaged(beside));
  // This thread's own thread-local capture does.
  CHECK_CU(cuStreamBeginCapture(streams[2], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CUdeviceptr inside = 0;
  std::printf("inside_result=%d\n", static_cast<int>(cuMemAlloc(&inside, 1 << 20)));
  cuStreamEndCapture(streams[2], &graph);
  // Relaxed mode (cuThreadExchangeStreamCaptureMode) lets the thread allocate during its own
  // capture, and spillway back it with managed memory as usual.
  CHECK_CU(cuStreamBeginCapture(streams[2], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
  CUdeviceptr relaxed = 0;
  CHECK_CU(cuMemAlloc(&relaxed, 1 << 20));
  std::printf("relaxed_managed=%u\n", IsManaged(relaxed));
  CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
  std::printf("relaxed_end_result=%d\n", static_cast<int>(cuStreamEndCapture(streams[2], &graph)));
  cuStreamEndCapture(streams[1], &graph);
  for (CUdeviceptr pointer : {after, beside, relaxed}) CHECK_CU(cuMemFree(pointer));
  for (CUstream stream : streams) CHECK_CU(cuStreamDestroy(stream));
  return 0;
}

int Multi(int total_mib) {
  constexpr uint64_t kBuffer = 4ull << 20;
  constexpr uint64_t kWords = kBuffer / 4;
  constexpr int kDevices = 2;
  const int count = total_mib / 4;
  CUcontext contexts[kDevices];
  CUstream streams[kDevices];
  CUdeviceptr sums[kDevices];
  for (int d = 0; d < kDevices; ++d) {
    CHECK_CU(cuDevicePrimaryCtxRetain(&contexts[d], d));
    CHECK_CU(cuCtxSetCurrent(contexts[d]));
    CHECK_CU(cuStreamCreate(&streams[d], CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuMemAllocManaged(&sums[d], count * sizeof(uint64_t), CU_MEM_ATTACH_GLOBAL));
    std::memset(reinterpret_cast<void*>(sums[d]), 0, count * sizeof(uint64_t));
  }
  std::vector<CUdeviceptr> buffers(kDevices * count);
  for (int i = 0; i < count; ++i) {
    for (int d = 0; d < kDevices; ++d) {
      CHECK_CU(cuCtxSetCurrent(contexts[d]));
      CUdeviceptr& buffer = buffers[i * kDevices + d];
      CHECK_CU(cuMemAlloc(&buffer, kBuffer));
      Fill(buffer, static_cast<uint32_t>(i * kDevices + d), kWords, streams[d]);
    }
  }
  for (int i = 0; i < count; ++i) {
    for (int d = 0; d < kDevices; ++d) {
      CHECK_CU(cuCtxSetCurrent(contexts[d]));
      Sum(buffers[i * kDevices + d], kWords, sums[d] + i * sizeof(uint64_t), streams[d]);
    }
  }
  int wrong = 0;
  for (int d = 0; d < kDevices; ++d) {
    CHECK_CU(cuCtxSetCurrent(contexts[d]));
    CHECK_CU(cuStreamSynchronize(streams[d]));
    int ordinal = -1;
    CHECK_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, buffers[d]));
    std::printf("device%d_ordinal=%d\n", d, ordinal);
    const auto* results = reinterpret_cast<const uint64_t*>(sums[d]);
    for (int i = 0; i < count; ++i) {
      wrong += results[i] != Expected(static_cast<uint32_t>(i * kDevices + d), kWords) ? 1 : 0;
    }
    CHECK_CU(cuStreamDestroy(streams[d]));
    // What the device reports as taken: its own allocations, not the other device's.
    size_t free_bytes = 0, total_bytes = 0;
    CHECK_CU(cuMemGetInfo(&free_bytes, &total_bytes));
    std::printf("device%d_taken_mib=%zu\n", d, (total_bytes - free_bytes) >> 20);
  }
  // Everything is freed with the first device's context current, the second device's memory too.
  CHECK_CU(cuCtxSetCurrent(contexts[0]));
  for (const CUdeviceptr buffer : buffers) CHECK_CU(cuMemFree(buffer));
  for (const CUdeviceptr sum : sums) CHECK_CU(cuMemFree(sum));
  std::printf("buffers=%d wrong=%d\n", kDevices * count, wrong);
  return wrong == 0 ? 0 : 1;
}

// Six 4 MiB buffers on the second device (made with its context current), filled; then two
// synchronous memsets from their second MiB on, each over an evicted buffer, the first with the
// first device's context current, the second with the second's; then sums, and frees from the
// second's.
// A relaxed-mode capture of stream A, whose last launches used buffers the engine then evicts for
// launches on stream B: the eviction's wait for A's last use must not go on A, where it would be
// captured and join B to the capture.
int CaptureElsewhere() {
  constexpr uint64_t kBuffer = 4ull << 20;
  constexpr uint64_t kWords = kBuffer / 4;
  constexpr int kCount = 8;
  CUstream a = nullptr, b = nullptr;
  CHECK_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  std::vector<CUdeviceptr> used_on_a(kCount), used_on_b(kCount);
  for (int i = 0; i < kCount; ++i) {
    CHECK_CU(cuMemAlloc(&used_on_a[i], kBuffer));
    CHECK_CU(cuMemAlloc(&used_on_b[i], kBuffer));
  }
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kCount; ++i) Fill(used_on_a[i], static_cast<uint32_t>(i), kWords, a);
  }
  CHECK_CU(cuStreamSynchronize(a));
  CHECK_CU(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED));
  for (int i = 0; i < kCount; ++i) Fill(used_on_b[i], static_cast<uint32_t>(100 + i), kWords, b);
  CUstreamCaptureStatus b_status = CU_STREAM_CAPTURE_STATUS_NONE;
  CHECK_CU(cuStreamIsCapturing(b, &b_status));
  std::printf("b_capture_status=%d\n", static_cast<int>(b_status));
  Fill(used_on_a[0], 7, kWords, a);  // captured
  CUgraph graph = nullptr;
  std::printf("end_result=%d\n", static_cast<int>(cuStreamEndCapture(a, &graph)));
  CHECK_CU(cuCtxSynchronize());
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    uint32_t word = 0;
    CHECK_CU(cuMemcpyDtoH(&word, used_on_b[i] + 4, sizeof(word)));
    wrong += word != 100u + i + 1 ? 1 : 0;
    CHECK_CU(cuMemcpyDtoH(&word, used_on_a[i] + 4, sizeof(word)));
    wrong += word != static_cast<uint32_t>(i) + 1 ? 1 : 0;  // the captured fill never ran
  }
  std::printf("elsewhere_wrong=%d\n", wrong);
  if (graph != nullptr) CHECK_CU(cuGraphDestroy(graph));
  return 0;
}

int CrossContext() {
  constexpr uint64_t kBuffer = 4ull << 20;
  constexpr uint64_t kWords = kBuffer / 4;
  constexpr uint64_t kFrom = (1ull << 20) / 4;  // the memsets start at this word
  constexpr int kCount = 6;
  CUcontext first = nullptr, second = nullptr;
  CHECK_CU(cuDevicePrimaryCtxRetain(&first, 0));
  CHECK_CU(cuDevicePrimaryCtxRetain(&second, 1));
  CHECK_CU(cuCtxSetCurrent(second));
  CUdeviceptr sums = 0;
  CHECK_CU(cuMemAllocManaged(&sums, kCount * sizeof(uint64_t), CU_MEM_ATTACH_GLOBAL));
  std::memset(reinterpret_cast<void*>(sums), 0, kCount * sizeof(uint64_t));
  std::vector<CUdeviceptr> buffers(kCount);
  for (int i = 0; i < kCount; ++i) {
    CHECK_CU(cuMemAlloc(&buffers[i], kBuffer));
    Fill(buffers[i], static_cast<uint32_t>(i), kWords, nullptr);
  }
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuCtxSetCurrent(first));
  CHECK_CU(cuMemsetD32(buffers[0] + kFrom * 4, 7, kWords - kFrom));
  CHECK_CU(cuCtxSetCurrent(second));
  CHECK_CU(cuMemsetD32(buffers[1] + kFrom * 4, 7, kWords - kFrom));
  for (int i = 0; i < kCount; ++i) Sum(buffers[i], kWords, sums + i * sizeof(uint64_t), nullptr);
  CHECK_CU(cuCtxSynchronize());
  const auto* results = reinterpret_cast<const uint64_t*>(sums);
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    const uint64_t expected =
        i < 2 ? Expected(i, kFrom) + 7 * (kWords - kFrom) : Expected(i, kWords);
    wrong += results[i] != expected ? 1 : 0;
  }
  for (const CUdeviceptr buffer : buffers) CHECK_CU(cuMemFree(buffer));
  CHECK_CU(cuMemFree(sums));
  std::printf("crossctx_wrong=%d\n", wrong);
  return wrong == 0 ? 0 : 1;
}

// A stream-ordered allocation on the last device, its context current (with two devices, the
// shim must tell which device's context is current to back it with that device's managed pool),
// after the job set its device pool's release threshold to UINT64_MAX and turned off its
// opportunistic reuse, as PyTorch's cudaMallocAsync backend does; reports the pool that owns it.
int AsyncPool() {
  int count = 0;
  CHECK_CU(cuDeviceGetCount(&count));
  const CUdevice device = count - 1;
  CUcontext context = nullptr;
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_CU(cuCtxSetCurrent(context));
  CUmemoryPool device_pool = nullptr;
  CHECK_CU(cuDeviceGetDefaultMemPool(&device_pool, device));
  cuuint64_t threshold = UINT64_MAX;
  CHECK_CU(cuMemPoolSetAttribute(device_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  int opportunistic = 0;
  CHECK_CU(cuMemPoolSetAttribute(device_pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                                 &opportunistic));
  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr pointer = 0;
  CHECK_CU(cuMemAllocAsync(&pointer, 4 << 20, stream));
  CUmemoryPool owner = nullptr;
  CHECK_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, pointer));
  cuuint64_t owner_threshold = 0;
  CHECK_CU(cuMemPoolGetAttribute(owner, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &owner_threshold));
  int owner_opportunistic = -1;
  CHECK_CU(cuMemPoolGetAttribute(owner, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                                 &owner_opportunistic));
  int owner_internal = -1;
  CHECK_CU(cuMemPoolGetAttribute(owner, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                                 &owner_internal));
  std::printf("asyncpool_device=%d\n", device);
  std::printf("asyncpool_managed=%u\n", IsManaged(pointer));
  std::printf("asyncpool_owner_is_device_pool=%d\n", owner == device_pool ? 1 : 0);
  std::printf("asyncpool_threshold_max=%d\n", owner_threshold == UINT64_MAX ? 1 : 0);
  std::printf("asyncpool_opportunistic=%d\n", owner_opportunistic);
  std::printf("asyncpool_internal=%d\n", owner_internal);
  CHECK_CU(cuMemFreeAsync(pointer, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuStreamDestroy(stream));
  return 0;
}

// What a framework's stream-ordered allocator does with the default pool (TensorFlow's
// cuda_malloc_async, PyTorch's cudaMallocAsync backend): settings made after its first
// allocation, statistics read, memory trimmed (torch.cuda.empty_cache). Prints the default pool's
// statistics in MiB at each step.
int PoolStats() {
  CUmemoryPool pool = nullptr;
  CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0));
  auto mib = [&](CUmemPool_attribute attribute) {
    cuuint64_t bytes = 0;
    CHECK_CU(cuMemPoolGetAttribute(pool, attribute, &bytes));
    return static_cast<unsigned long long>(bytes >> 20);
  };
  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr pointer = 0;
  CHECK_CU(cuMemAllocAsync(&pointer, 4 << 20, stream));
  std::printf("poolstats_managed=%u\n", IsManaged(pointer));
  std::printf("poolstats_used=%llu\n", mib(CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
  std::printf("poolstats_reserved=%llu\n", mib(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
  cuuint64_t threshold = UINT64_MAX;
  CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  CHECK_CU(cuMemFreeAsync(pointer, stream));
  CHECK_CU(cuStreamSynchronize(stream));  // keeps what the threshold allows
  std::printf("poolstats_used_after_free=%llu\n", mib(CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
  std::printf("poolstats_reserved_after_free=%llu\n", mib(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
  std::printf("poolstats_used_high=%llu\n", mib(CU_MEMPOOL_ATTR_USED_MEM_HIGH));
  cuuint64_t zero = 0;
  CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
  std::printf("poolstats_used_high_after_reset=%llu\n", mib(CU_MEMPOOL_ATTR_USED_MEM_HIGH));
  CHECK_CU(cuMemPoolTrimTo(pool, 0));
  std::printf("poolstats_reserved_after_trim=%llu\n", mib(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
  CHECK_CU(cuStreamDestroy(stream));
  return 0;
}

// Each device's default pool counts the stream-ordered allocations made on that device only,
// read from either device's context.
int DevicePools() {
  constexpr int kDevices = 2;
  CUcontext contexts[kDevices];
  CUstream streams[kDevices];
  CUdeviceptr buffers[kDevices];
  for (int d = 0; d < kDevices; ++d) {
    CHECK_CU(cuDevicePrimaryCtxRetain(&contexts[d], d));
    CHECK_CU(cuCtxSetCurrent(contexts[d]));
    CHECK_CU(cuStreamCreate(&streams[d], CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuMemAllocAsync(&buffers[d], (4u + 2u * d) << 20, streams[d]));
    std::printf("devicepools_managed%d=%u\n", d, IsManaged(buffers[d]));
  }
  CHECK_CU(cuCtxSetCurrent(contexts[0]));
  for (int d = 0; d < kDevices; ++d) {
    CUmemoryPool pool = nullptr;
    CHECK_CU(cuDeviceGetDefaultMemPool(&pool, d));
    cuuint64_t used = 0;
    CHECK_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    std::printf("devicepools_used%d=%llu\n", d, static_cast<unsigned long long>(used >> 20));
  }
  for (int d = 0; d < kDevices; ++d) {
    CHECK_CU(cuCtxSetCurrent(contexts[d]));
    CHECK_CU(cuMemFreeAsync(buffers[d], streams[d]));
    CHECK_CU(cuStreamSynchronize(streams[d]));
    CHECK_CU(cuStreamDestroy(streams[d]));
  }
  return 0;
}

// Fills `buffers` with values from `first` on, on `stream`.
void FillAll(const std::vector<CUdeviceptr>& buffers, uint32_t first, uint64_t words,
             CUstream stream) {
  for (size_t i = 0; i < buffers.size(); ++i) {
    Fill(buffers[i], first + static_cast<uint32_t>(i), words, stream);
  }
}

// Sums `buffers` on `stream` and returns how many hold other than FillAll(.., first, ..) left.
int WrongSums(const std::vector<CUdeviceptr>& buffers, uint32_t first, uint64_t words,
              CUstream stream) {
  const size_t count = buffers.size();
  CUdeviceptr sums = 0;
  CHECK_CU(cuMemAllocManaged(&sums, count * sizeof(uint64_t), CU_MEM_ATTACH_GLOBAL));
  std::memset(reinterpret_cast<void*>(sums), 0, count * sizeof(uint64_t));
  for (size_t i = 0; i < count; ++i) Sum(buffers[i], words, sums + i * sizeof(uint64_t), stream);
  CHECK_CU(cuStreamSynchronize(stream));
  const auto* results = reinterpret_cast<const uint64_t*>(sums);
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    wrong += results[i] != Expected(first + static_cast<uint32_t>(i), words) ? 1 : 0;
  }
  CHECK_CU(cuMemFree(sums));
  return wrong;
}

// A job that resets the device mid-run (cudaDeviceReset; with `release`, releases the primary
// context for the last time instead) and goes on: what spillway recorded of the freed memory must
// neither count in cuMemGetInfo nor be acted on when the job frees an old pointer again, while
// what another context holds stays.
int Reset(int total_mib, bool release) {
  constexpr uint64_t kBuffer = 4ull << 20;
  constexpr uint64_t kWords = kBuffer / 4;
  const int count = total_mib / 4;
  size_t free_at_start = 0, total = 0;
  CHECK_CU(cuMemGetInfo(&free_at_start, &total));
  CUcontext primary = nullptr, keeper = nullptr;
  CHECK_CU(cuCtxGetCurrent(&primary));
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  // A buffer of another context, which the reset leaves alone.
  CHECK_CU(cuCtxCreate(&keeper, nullptr, 0, device));
  CUdeviceptr kept = 0;
  CHECK_CU(cuMemAlloc(&kept, kBuffer));
  CHECK_CU(cuCtxSetCurrent(primary));
  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  FillAll({kept}, 50, kWords, stream);
  std::vector<CUdeviceptr> old_buffers(count);
  for (CUdeviceptr& buffer : old_buffers) CHECK_CU(cuMemAlloc(&buffer, kBuffer));
  FillAll(old_buffers, 1, kWords, stream);
  std::printf("reset_wrong_before=%d\n", WrongSums(old_buffers, 1, kWords, stream));

  // Frees the buffers and destroys the stream.
  CHECK_CU(release ? cuDevicePrimaryCtxRelease(device) : cuDevicePrimaryCtxReset(device));
  CHECK_CU(cuDevicePrimaryCtxRetain(&primary, device));
  CHECK_CU(cuCtxSetCurrent(primary));
  LoadKernels();
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr pad = 0;
  CHECK_CU(cuMemAlloc(&pad, kBuffer / 2));
  std::vector<CUdeviceptr> new_buffers(count);
  for (CUdeviceptr& buffer : new_buffers) CHECK_CU(cuMemAlloc(&buffer, kBuffer));
  FillAll(new_buffers, 100, kWords, stream);
  CHECK_CU(cuStreamSynchronize(stream));
  size_t free_after = 0;
  CHECK_CU(cuMemGetInfo(&free_after, &total));
  std::printf("reset_taken_mib=%llu\n",
              static_cast<unsigned long long>((free_at_start - free_after) >> 20));
  std::printf("reset_old_inside_new=%d\n",
              old_buffers[1] > new_buffers[0] && old_buffers[1] < new_buffers[0] + kBuffer ? 1 : 0);
  std::printf("reset_double_free=%d\n", static_cast<int>(cuMemFree(old_buffers[1])));
  std::printf("reset_wrong_after=%d\n", WrongSums(new_buffers, 100, kWords, stream));
  std::printf("reset_kept_wrong=%d\n", WrongSums({kept}, 50, kWords, stream));
  for (CUdeviceptr buffer : new_buffers) CHECK_CU(cuMemFree(buffer));
  CHECK_CU(cuMemFree(pad));
  CHECK_CU(cuStreamDestroy(stream));
  CHECK_CU(cuCtxSetCurrent(keeper));
  CHECK_CU(cuMemFree(kept));
  CHECK_CU(cuCtxDestroy(keeper));
  return 0;
}

// Work in a context the job creates and destroys, then in the primary context.
int DestroyContext(int total_mib) {
  constexpr uint64_t kBuffer = 4ull << 20;
  constexpr uint64_t kWords = kBuffer / 4;
  const int count = total_mib / 4;
  CUcontext primary = nullptr, created = nullptr;
  CHECK_CU(cuCtxGetCurrent(&primary));
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  CHECK_CU(cuCtxCreate(&created, nullptr, 0, device));
  for (CUcontext context : {created, primary}) {
    CHECK_CU(cuCtxSetCurrent(context));
    LoadKernels();
    CUstream stream = nullptr;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    std::vector<CUdeviceptr> buffers(count);
    for (CUdeviceptr& buffer : buffers) CHECK_CU(cuMemAlloc(&buffer, kBuffer));
    FillAll(buffers, 1, kWords, stream);
    const char* name = context == created ? "created" : "primary";
    std::printf("destroyctx_wrong_%s=%d\n", name, WrongSums(buffers, 1, kWords, stream));
    if (context == created) {
      CHECK_CU(cuCtxDestroy(created));  // frees the buffers and the stream
    } else {
      for (CUdeviceptr buffer : buffers) CHECK_CU(cuMemFree(buffer));
      CHECK_CU(cuStreamDestroy(stream));
    }
  }
  return 0;
}

// `rounds` times: fills 24 MiB of buffers in the primary context, then resets the device. Each
// round's engine retires with its context; the summary still counts what each one moved.
int Resets(int rounds) {
  constexpr uint64_t kBuffer = 4ull << 20;
  constexpr uint64_t kWords = kBuffer / 4;
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  int wrong = 0;
  for (int round = 0; round < rounds; ++round) {
    CUcontext primary = nullptr;
    CHECK_CU(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_CU(cuCtxSetCurrent(primary));
    LoadKernels();
    CUstream stream = nullptr;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    std::vector<CUdeviceptr> buffers(6);
    for (CUdeviceptr& buffer : buffers) CHECK_CU(cuMemAlloc(&buffer, kBuffer));
    FillAll(buffers, static_cast<uint32_t>(round), kWords, stream);
    CHECK_CU(cuStreamSynchronize(stream));
    if (round + 1 == rounds)
      wrong = WrongSums(buffers, static_cast<uint32_t>(round), kWords, stream);
    CHECK_CU(cuDevicePrimaryCtxReset(device));  // frees the buffers and the stream
    CHECK_CU(cuDevicePrimaryCtxRelease(device));
  }
  std::printf("resets_wrong=%d\n", wrong);
  return 0;
}

// Where the driver makes no managed pool for spillway, spillway's stream-ordered allocations come
// from the driver's managed pool, which the job may use itself: the default pool's settings,
// statistics and trims must leave it alone.
int JobPool() {
  CUmemLocation none{};
  none.type = CU_MEM_LOCATION_TYPE_NONE;
  CUmemoryPool job_pool = nullptr;
  CHECK_CU(cuMemGetMemPool(&job_pool, &none, CU_MEM_ALLOCATION_TYPE_MANAGED));
  cuuint64_t keep_all = UINT64_MAX;
  CHECK_CU(cuMemPoolSetAttribute(job_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));
  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr job_buffer = 0, buffer = 0;
  CHECK_CU(cuMemAllocFromPoolAsync(&job_buffer, 8 << 20, job_pool, stream));
  CHECK_CU(cuMemAllocAsync(&buffer, 4 << 20, stream));
  std::printf("jobpool_managed=%u\n", IsManaged(buffer));
  CUmemoryPool default_pool = nullptr;
  CHECK_CU(cuDeviceGetDefaultMemPool(&default_pool, 0));
  cuuint64_t release_all = 0;
  CHECK_CU(cuMemPoolSetAttribute(default_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &release_all));
  cuuint64_t used = 0;
  CHECK_CU(cuMemPoolGetAttribute(default_pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  std::printf("jobpool_default_used=%llu\n", static_cast<unsigned long long>(used >> 20));
  CHECK_CU(cuMemFreeAsync(job_buffer, stream));
  CHECK_CU(cuMemFreeAsync(buffer, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuMemPoolTrimTo(default_pool, 0));
  cuuint64_t threshold = 0, reserved = 0;
  CHECK_CU(cuMemPoolGetAttribute(job_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  CHECK_CU(cuMemPoolGetAttribute(job_pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  std::printf("jobpool_threshold_max=%d\n", threshold == UINT64_MAX ? 1 : 0);
  std::printf("jobpool_reserved_after_free=%llu\n",
              static_cast<unsigned long long>(reserved >> 20));
  CHECK_CU(cuStreamDestroy(stream));
  return 0;
}

// Settings made on the default pool while spillway makes the managed pool that stands in for it
// (on another thread): the managed pool ends with the value the default pool kept.
int PoolRace() {
  CUcontext context = nullptr;
  CHECK_CU(cuCtxGetCurrent(&context));
  CUmemoryPool default_pool = nullptr;
  CHECK_CU(cuDeviceGetDefaultMemPool(&default_pool, 0));
  std::vector<std::thread> setters;
  for (int t = 0; t < 4; ++t) {
    setters.emplace_back([&, t] {
      CHECK_CU(cuCtxSetCurrent(context));
      for (int i = 0; i < 50; ++i) {
        cuuint64_t threshold = (uint64_t{1} << 20) * (100 * t + i + 1);
        CHECK_CU(
            cuMemPoolSetAttribute(default_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
      }
    });
  }
  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr buffer = 0;
  CHECK_CU(cuMemAllocAsync(&buffer, 4 << 20, stream));
  for (std::thread& setter : setters) setter.join();
  CUmemoryPool owner = nullptr;
  CHECK_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, buffer));
  cuuint64_t kept = 0, owners = 0;
  CHECK_CU(cuMemPoolGetAttribute(default_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &kept));
  CHECK_CU(cuMemPoolGetAttribute(owner, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &owners));
  std::printf("poolrace_managed=%u\n", IsManaged(buffer));
  std::printf("poolrace_same_threshold=%d\n", kept == owners ? 1 : 0);
  CHECK_CU(cuMemFreeAsync(buffer, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuStreamDestroy(stream));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SCENARIO KERNEL_LIBRARY [ARG]\n", argv[0]);
    return 1;
  }
  const std::string scenario = argv[1];
  CHECK_CU(cuInit(0));
  CUdevice device = 0;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_CU(cuCtxSetCurrent(context));
  g_kernel_library = argv[2];
  LoadKernels();
  const char* arg = argc > 3 ? argv[3] : "";
  int status = 1;
  if (scenario == "async") status = Async(std::atoi(arg));
  if (scenario == "userpool") status = UserPool();
  if (scenario == "pitch") status = PitchOverflow();
  if (scenario == "ipc") status = Ipc();
  if (scenario == "module") status = Module(arg);
  if (scenario == "info") status = Info();
  if (scenario == "multi") status = Multi(std::atoi(arg));
  if (scenario == "capture") status = Capture();
  if (scenario == "ptsz") status = PerThreadStream(g_fill, g_sum);
  if (scenario == "copies") status = Copies(std::atoi(arg), g_fill, g_sum);
  if (scenario == "crossctx") status = CrossContext();
  if (scenario == "capture_elsewhere") status = CaptureElsewhere();
  if (scenario == "legacy_order") status = LegacyOrder(std::atoi(arg), g_fill);
  if (scenario == "asyncpool") status = AsyncPool();
  if (scenario == "poolstats") status = PoolStats();
  if (scenario == "devicepools") status = DevicePools();
  if (scenario == "jobpool") status = JobPool();
  if (scenario == "reset") status = Reset(std::atoi(arg), /*release=*/false);
  if (scenario == "release") status = Reset(std::atoi(arg), /*release=*/true);
  if (scenario == "destroyctx") status = DestroyContext(std::atoi(arg));
  if (scenario == "resets") status = Resets(std::atoi(arg));
  if (scenario == "poolrace") status = PoolRace();
  std::printf("done=%d\n", status);
  return status;
}
