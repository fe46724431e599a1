// The allocation hooks: what is noted after an allocation or a free, and, in run mode, device
// allocations backed by managed memory (stream-ordered ones by a managed pool), frees discarded
// first, IPC handles refused for managed memory, memory info as the engine's capacity, and the
// default pools' settings carried to the managed ones. Included by hooks.cc only.
#ifndef SPILLWAY_INTERPOSE_HOOKS_ALLOC_H_
#define SPILLWAY_INTERPOSE_HOOKS_ALLOC_H_

#include "interpose/hooks_common.h"

namespace spillway::interpose {

template <>
struct After<HookId::k_cuMemAlloc_v2> {
  static void Run(CUresult r, CUdeviceptr* dptr, size_t bytes) {
    if (r == CUDA_SUCCESS && dptr != nullptr) OnAllocated(*dptr, bytes, policy::Backing::kDevice);
  }
};
template <>
struct After<HookId::k_cuMemAllocPitch_v2> {
  static void Run(CUresult r, CUdeviceptr* dptr, size_t* pitch, size_t, size_t height,
                  unsigned int) {
    if (r == CUDA_SUCCESS && dptr != nullptr && pitch != nullptr) {
      OnAllocated(*dptr, static_cast<uint64_t>(*pitch) * height, policy::Backing::kDevice);
    }
  }
};
template <>
struct After<HookId::k_cuMemAllocManaged> {
  static void Run(CUresult r, CUdeviceptr* dptr, size_t bytes, unsigned int) {
    if (r == CUDA_SUCCESS && dptr != nullptr) OnAllocated(*dptr, bytes, policy::Backing::kManaged);
  }
};
struct AfterAsyncAlloc {
  static void Run(CUresult r, CUdeviceptr* dptr, size_t bytes, CUstream) {
    if (r == CUDA_SUCCESS && dptr != nullptr) {
      OnAllocated(*dptr, bytes, policy::Backing::kDevice, /*stream_ordered=*/true);
    }
  }
};
template <>
struct After<HookId::k_cuMemAllocAsync> : AfterAsyncAlloc {};
template <>
struct After<HookId::k_cuMemAllocAsync_ptsz> : AfterAsyncAlloc {};
struct AfterPoolAlloc {
  static void Run(CUresult r, CUdeviceptr* dptr, size_t bytes, CUmemoryPool, CUstream) {
    if (r == CUDA_SUCCESS && dptr != nullptr) {
      OnAllocated(*dptr, bytes, policy::Backing::kDevice, /*stream_ordered=*/true);
    }
  }
};
template <>
struct After<HookId::k_cuMemAllocFromPoolAsync> : AfterPoolAlloc {};
template <>
struct After<HookId::k_cuMemAllocFromPoolAsync_ptsz> : AfterPoolAlloc {};
template <>
struct After<HookId::k_cuMemCreate> {
  static void Run(CUresult r, CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                  unsigned long long) {
    if (r == CUDA_SUCCESS) OnVmmCreated();
  }
};
template <>
struct After<HookId::k_cuMemFree_v2> {
  static void Run(CUresult r, CUdeviceptr dptr) {
    if (r == CUDA_SUCCESS) OnFreed(dptr);
  }
};
struct AfterAsyncFree {
  static void Run(CUresult r, CUdeviceptr dptr, CUstream) {
    if (r == CUDA_SUCCESS) OnFreed(dptr);
  }
};
template <>
struct After<HookId::k_cuMemFreeAsync> : AfterAsyncFree {};
template <>
struct After<HookId::k_cuMemFreeAsync_ptsz> : AfterAsyncFree {};

// Backs a device allocation of `bytes` with managed memory. False (nothing allocated) when the
// engine does not run or managed memory is refused: the caller then makes the real call.
inline bool AllocateManagedInstead(CUdeviceptr* dptr, uint64_t bytes) {
  if (dptr == nullptr || bytes == 0 || Engine() == nullptr) return false;
  if (const std::optional<DeviceReason> reason = DeviceMemoryReason(false, nullptr, false)) {
    CountDeviceException(*reason);
    return false;
  }
  uint64_t address = 0;
  DriverDevice device;
  const policy::DeviceResult result = device.AllocateManaged(&address, bytes);
  if (result != CUDA_SUCCESS) {
    SPILLWAY_REPORT_ONCE(reported,
                         "cuMemAllocManaged of %llu bytes failed (error %d); device "
                         "allocations pass through from now on when that happens",
                         static_cast<unsigned long long>(bytes), result);
    return false;
  }
  *dptr = address;
  OnAllocated(address, bytes, policy::Backing::kManaged, false, /*substituted=*/true);
  return true;
}

template <>
struct Replace<HookId::k_cuMemAlloc_v2> {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdeviceptr*, size_t), CUdeviceptr* dptr, size_t bytes) {
    if (AllocateManagedInstead(dptr, bytes)) return CUDA_SUCCESS;
    const CUresult result = real(dptr, bytes);
    After<HookId::k_cuMemAlloc_v2>::Run(result, dptr, bytes);
    return result;
  }
};

template <>
struct Replace<HookId::k_cuMemAllocPitch_v2> {
  static constexpr bool kActive = true;
  static constexpr size_t kPitchAlignment = 512;  // what the driver rounds pitches up to
  static CUresult Run(CUresult (*real)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int),
                      CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                      unsigned int element_bytes) {
    // A size that does not fit in 64 bits goes to the driver, which refuses it.
    const bool valid = pitch != nullptr && width != 0 && height != 0 &&
                       (element_bytes == 4 || element_bytes == 8 || element_bytes == 16) &&
                       width <= SIZE_MAX - (kPitchAlignment - 1);
    const size_t rounded =
        valid ? (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment : 0;
    if (valid && rounded <= SIZE_MAX / height) {
      if (AllocateManagedInstead(dptr, static_cast<uint64_t>(rounded) * height)) {
        *pitch = rounded;
        return CUDA_SUCCESS;
      }
    }
    const CUresult result = real(dptr, pitch, width, height, element_bytes);
    After<HookId::k_cuMemAllocPitch_v2>::Run(result, dptr, pitch, width, height, element_bytes);
    return result;
  }
};

template <>
struct Replace<HookId::k_cuMemFree_v2> {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdeviceptr), CUdeviceptr dptr) {
    const std::optional<policy::Allocation> found = Allocations().Erase(dptr);
    policy::ResidencyEngine* engine = found.has_value() ? EngineOf(found->device) : nullptr;
    if (engine != nullptr) {
      // During any capture the synchronization and the discard could fail or break it (the free
      // itself is the job's call): the engine only forgets the allocation.
      // Nor while the job fits in the budget (the engine discards nothing then): no wait either.
      bool discard = !Captures().AnyInProgress() && engine->DiscardsFrees();
      if (discard && found->backing == policy::Backing::kManaged) {
        // cuMemFree waits for the device anyway; waiting first makes the discard safe even for
        // work on non-blocking streams that still reads the memory. That waits for the current
        // context only: memory made on another device is freed without a discard.
        using SyncFn = CUresult (*)();
        const auto sync = reinterpret_cast<SyncFn>(RealFunction(Index(HookId::k_cuCtxSynchronize)));
        discard = CurrentDevice() == found->device && sync != nullptr && sync() == CUDA_SUCCESS;
      }
      // A capture begun during the wait is seen here, and none begins before the discard (on the
      // legacy stream's stand-in) is enqueued. The wait is outside: it could wait for the thread
      // that begins one.
      CaptureTracker::NoCaptureScope scope(Captures());
      if (!discard || !scope.admitted() || Captures().AnyInProgress()) {
        engine->Forget(*found);
      } else if (EngineCallsFailed([&] { return engine->OnFree(*found, nullptr); })) {
        SPILLWAY_REPORT_ONCE(reported, "discard before cuMemFree failed; freeing without it");
      }
    }
    return real(dptr);
  }
};

// Backs a stream-ordered allocation with the device's managed pool, on `stream`. nullopt (nothing
// allocated) when the engine does not run, the allocation is a device-memory exception, no
// managed pool exists, or (`from_current_pool`: a cuMemAllocAsync, which allocates from the
// device's current pool) the job made a pool of its own current: the caller then makes the real
// call.
template <bool kPerThread>
std::optional<CUresult> AllocateFromManagedPool(CUdeviceptr* dptr, size_t bytes, CUstream stream,
                                                bool from_current_pool) {
  if (dptr == nullptr || bytes == 0 || Engine() == nullptr) return std::nullopt;
  if (const std::optional<DeviceReason> reason = DeviceMemoryReason(true, stream, kPerThread)) {
    CountDeviceException(*reason);
    return std::nullopt;
  }
  // A pool the job made current keeps its properties (IPC export, statistics, trimming): its
  // allocations pass through as from any pool of its own.
  if (from_current_pool && !CurrentPoolIsDefault()) return std::nullopt;
  CUmemoryPool pool = ManagedPool();
  if (pool == nullptr) return std::nullopt;
  constexpr HookId kFromPool =
      kPerThread ? HookId::k_cuMemAllocFromPoolAsync_ptsz : HookId::k_cuMemAllocFromPoolAsync;
  using FromPoolFn = CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
  const auto from_pool = reinterpret_cast<FromPoolFn>(RealFunction(Index(kFromPool)));
  if (from_pool == nullptr) return std::nullopt;
  const CUresult result = from_pool(dptr, bytes, pool, stream);
  if (result == CUDA_ERROR_INVALID_VALUE || result == CUDA_ERROR_INVALID_HANDLE ||
      result == CUDA_ERROR_INVALID_CONTEXT) {
    return std::nullopt;  // the job's own mistake: the real call answers it
  }
  if (result != CUDA_SUCCESS) {
    SPILLWAY_REPORT_ONCE(reported,
                         "a managed pool allocation of %llu bytes failed (error %d); "
                         "stream-ordered allocations pass through when that happens",
                         static_cast<unsigned long long>(bytes), result);
    return std::nullopt;
  }
  OnAllocated(*dptr, bytes, policy::Backing::kManaged, /*stream_ordered=*/true,
              /*substituted=*/true);
  return CUDA_SUCCESS;
}

template <bool kPerThread>
struct ReplaceAsyncAlloc {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdeviceptr*, size_t, CUstream), CUdeviceptr* dptr,
                      size_t bytes, CUstream stream) {
    if (const std::optional<CUresult> managed =
            AllocateFromManagedPool<kPerThread>(dptr, bytes, stream, /*from_current_pool=*/true)) {
      return *managed;
    }
    const CUresult result = real(dptr, bytes, stream);
    AfterAsyncAlloc::Run(result, dptr, bytes, stream);
    return result;
  }
};
template <>
struct Replace<HookId::k_cuMemAllocAsync> : ReplaceAsyncAlloc<false> {};
template <>
struct Replace<HookId::k_cuMemAllocAsync_ptsz> : ReplaceAsyncAlloc<true> {};

// A pool the job names: the device's default pool is what cuMemAllocAsync uses unless the job
// made another current, so it is backed the same way (TensorFlow's cuda_malloc_async allocates
// from the default pool by name). A pool the job created itself keeps its properties (IPC export,
// access, location): passthrough, registered as managed only when the driver says it is (a
// managed pool).
template <bool kPerThread>
struct ReplacePoolAlloc {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdeviceptr*, size_t, CUmemoryPool, CUstream),
                      CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
    if (IsDevicePool(pool)) {
      if (const std::optional<CUresult> managed = AllocateFromManagedPool<kPerThread>(
              dptr, bytes, stream, /*from_current_pool=*/false)) {
        return *managed;
      }
    }
    const CUresult result = real(dptr, bytes, pool, stream);
    if (result == CUDA_SUCCESS && dptr != nullptr) {
      const policy::Backing backing =
          IsManagedMemory(*dptr) ? policy::Backing::kManaged : policy::Backing::kDevice;
      OnAllocated(*dptr, bytes, backing, /*stream_ordered=*/true);
    }
    return result;
  }
};
template <>
struct Replace<HookId::k_cuMemAllocFromPoolAsync> : ReplacePoolAlloc<false> {};
template <>
struct Replace<HookId::k_cuMemAllocFromPoolAsync_ptsz> : ReplacePoolAlloc<true> {};

// Stream-ordered free: managed contents are discarded first, on the same stream, so the discard
// runs after the last use the stream orders before the free and dead data never moves.
template <bool kPerThread>
struct ReplaceAsyncFree {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdeviceptr, CUstream), CUdeviceptr dptr, CUstream stream) {
    const std::optional<policy::Allocation> found = Allocations().Erase(dptr);
    if (found.has_value()) {
      if (policy::ResidencyEngine* engine = EngineOf(found->device)) {
        const policy::Stream ordered =
            kPerThread && stream == nullptr ? CU_STREAM_PER_THREAD : stream;
        // A free into a capture, or while a capture forbids this thread's other calls: no discard.
        CaptureTracker::NoCaptureScope scope(Captures());
        if (!scope.admitted() || Captures().IsCapturing(ordered) ||
            Captures().HoldsBack("a discard")) {
          engine->Forget(*found);
        } else if (EngineCallsFailed([&] { return engine->OnFree(*found, ordered); })) {
          SPILLWAY_REPORT_ONCE(reported,
                               "discard before cuMemFreeAsync failed; freeing without it");
        }
      }
    }
    return real(dptr, stream);
  }
};
template <>
struct Replace<HookId::k_cuMemFreeAsync> : ReplaceAsyncFree<false> {};
template <>
struct Replace<HookId::k_cuMemFreeAsync_ptsz> : ReplaceAsyncFree<true> {};

// Managed memory has no IPC handle, and an allocation cannot turn into device memory once the job
// holds its address: refused, loudly, with the way out.
template <>
struct Replace<HookId::k_cuIpcGetMemHandle> {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUipcMemHandle*, CUdeviceptr), CUipcMemHandle* handle,
                      CUdeviceptr dptr) {
    const std::optional<policy::Allocation> found = Allocations().Find(dptr);
    // Memory the job itself made managed (cuMemAllocManaged): the driver answers as usual.
    if (!found.has_value() || found->backing != policy::Backing::kManaged || !found->substituted) {
      return real(handle, dptr);
    }
    CountIpcRefused();
    ReportProblem(LogLevel::kError,
                  "cuIpcGetMemHandle refused for allocation #%llu (%llu bytes at 0x%llx): "
                  "spillway made it managed memory, which has no IPC handle and cannot become "
                  "device memory now; list its module in SPILLWAY_DEVICE_MODULES or run without "
                  "spillway",
                  static_cast<unsigned long long>(found->id),
                  static_cast<unsigned long long>(found->size),
                  static_cast<unsigned long long>(found->base));
    return CUDA_ERROR_NOT_SUPPORTED;
  }
};

template <>
struct Replace<HookId::k_cuMemGetInfo_v2> {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(size_t*, size_t*), size_t* free, size_t* total) {
    const CUresult result = real(free, total);
    if (result != CUDA_SUCCESS || free == nullptr || total == nullptr) return result;
    const uint64_t reported = ReportedTotal(*total);
    if (reported != *total || Engine() != nullptr) {
      // What the job holds on this device (the context's); other devices' memory is their own.
      const uint64_t live = Allocations().live_bytes(CurrentDevice());
      *total = reported;
      *free = reported > live ? reported - live : 0;
    }
    return result;
  }
};

template <>
struct Replace<HookId::k_cuDeviceTotalMem_v2> {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(size_t*, CUdevice), size_t* bytes, CUdevice device) {
    const CUresult result = real(bytes, device);
    if (result == CUDA_SUCCESS && bytes != nullptr) *bytes = ReportedTotal(*bytes, device);
    return result;
  }
};

// A default pool's settings, statistics and trims (backing.h): the job's call, then, when it
// succeeded, the managed pool's part (`kThen`, with the same arguments).
template <auto kThen>
struct ReplaceThenManagedPool {
  static constexpr bool kActive = true;
  template <typename... Args>
  static CUresult Run(CUresult (*real)(Args...), Args... args) {
    const CUresult result = real(args...);
    if (result == CUDA_SUCCESS) kThen(args...);
    return result;
  }
};
template <>
struct Replace<HookId::k_cuMemPoolSetAttribute> : ReplaceThenManagedPool<ForwardPoolSetting> {};
template <>
struct Replace<HookId::k_cuMemPoolGetAttribute> : ReplaceThenManagedPool<AddManagedPoolStatistic> {
};
template <>
struct Replace<HookId::k_cuMemPoolTrimTo> : ReplaceThenManagedPool<TrimManagedPools> {};

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_HOOKS_ALLOC_H_
