// The exported hooks, generated from hooked_functions.inc, plus the hand-written ones: the two
// cuGetProcAddress versions and dlsym. Every hook counts the call and forwards to the real driver,
// noting allocations, frees and stream captures. In run (and record) mode a few replace the call
// (Replace<id>): cuMemAlloc/cuMemAllocPitch are backed by managed memory and cuMemAllocAsync (and
// cuMemAllocFromPoolAsync on the device's own pools) by a managed pool, unless the allocation is a
// device-memory exception (stream capture, SPILLWAY_DEVICE_MODULES); frees discard first (the
// async ones on the free's stream); cuIpcGetMemHandle is refused for managed memory; memory info
// reports the engine's capacity, and launches go through the residency engine first.
//
// Each hook is defined under a hidden name (spillway_hook_<name>) and exported as <name> through
// an alias, so the tables inside the library point at our code even where another object in the
// process also defines <name>.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>

#include "interpose/backing.h"
#include "interpose/context_end.h"
#include "interpose/driver_device.h"
#include "interpose/graph_hooks.h"
#include "interpose/hook_table.h"
#include "interpose/launch_prep.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/record_hooks.h"
#include "interpose/recorder.h"
#include "interpose/runtime.h"

#define SPILLWAY_HIDDEN __attribute__((visibility("hidden")))

namespace spillway::interpose {
namespace {

// What a hook does after the real call returned, per function. Default: nothing.
template <HookId id>
struct After {
  template <typename... Args>
  static void Run(CUresult, Args...) {}
};

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

// Stream captures: allocations the capturing thread makes meanwhile stay device memory.
const void* CaptureKey(CUstream stream, bool per_thread) {
  return per_thread && stream == nullptr ? CU_STREAM_PER_THREAD : stream;
}
template <bool kPerThread>
struct AfterBeginCapture {
  static void Run(CUresult r, CUstream stream, CUstreamCaptureMode mode) {
    if (r == CUDA_SUCCESS) Captures().OnBegin(CaptureKey(stream, kPerThread), mode);
  }
};
template <>
struct After<HookId::k_cuStreamBeginCapture_v2> : AfterBeginCapture<false> {};
template <>
struct After<HookId::k_cuStreamBeginCapture_v2_ptsz> : AfterBeginCapture<true> {};
template <bool kPerThread>
struct AfterBeginCaptureToGraph {
  static void Run(CUresult r, CUstream stream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*,
                  size_t, CUstreamCaptureMode mode) {
    AfterBeginCapture<kPerThread>::Run(r, stream, mode);
  }
};
template <>
struct After<HookId::k_cuStreamBeginCaptureToGraph> : AfterBeginCaptureToGraph<false> {};
template <>
struct After<HookId::k_cuStreamBeginCaptureToGraph_ptsz> : AfterBeginCaptureToGraph<true> {};
template <bool kPerThread>
struct AfterEndCapture {
  static void Run(CUresult r, CUstream stream, CUgraph*) {
    // An invalidated capture ended too; only a call from the wrong thread leaves it running.
    if (r != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) {
      Captures().OnEnd(CaptureKey(stream, kPerThread));
    }
  }
};
template <>
struct After<HookId::k_cuStreamEndCapture> : AfterEndCapture<false> {};
template <>
struct After<HookId::k_cuStreamEndCapture_ptsz> : AfterEndCapture<true> {};

// Unloads: a function loaded later may get an unloaded one's handle, and with it a stale parameter
// layout (more parameters than its launches pass) and, in record mode, a stale name. Nothing
// cached by handle is used while the unload is under way, and all of it is forgotten after.
struct ReplaceUnload {
  static constexpr bool kActive = true;
  template <typename Handle>
  static CUresult Run(CUresult (*real)(Handle), Handle handle) {
    BeginUnload();
    const CUresult result = real(handle);
    if (result == CUDA_SUCCESS) ForgetFunctionNames();
    EndUnload();
    return result;
  }
};

// Graphs: the kernel-node access sets of each instantiated graph (graph_hooks.cc).
template <>
struct After<HookId::k_cuGraphInstantiateWithFlags> {
  static void Run(CUresult r, CUgraphExec* exec, CUgraph graph, unsigned long long) {
    if (r == CUDA_SUCCESS && exec != nullptr) OnGraphInstantiated(*exec, graph);
  }
};
struct AfterInstantiateWithParams {
  static void Run(CUresult r, CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS*) {
    if (r == CUDA_SUCCESS && exec != nullptr) OnGraphInstantiated(*exec, graph);
  }
};
template <>
struct After<HookId::k_cuGraphInstantiateWithParams> : AfterInstantiateWithParams {};
template <>
struct After<HookId::k_cuGraphInstantiateWithParams_ptsz> : AfterInstantiateWithParams {};
struct AfterLegacyInstantiate {
  static void Run(CUresult r, CUgraphExec* exec, CUgraph graph, CUgraphNode*, char*, size_t) {
    if (r == CUDA_SUCCESS && exec != nullptr) OnGraphInstantiated(*exec, graph);
  }
};
template <>
struct After<HookId::k_cuGraphInstantiate> : AfterLegacyInstantiate {};
template <>
struct After<HookId::k_cuGraphInstantiate_v2> : AfterLegacyInstantiate {};
template <>
struct After<HookId::k_cuGraphExecDestroy> {
  static void Run(CUresult r, CUgraphExec exec) {
    if (r == CUDA_SUCCESS) OnGraphExecDestroyed(exec);
  }
};
template <>
struct After<HookId::k_cuGraphExecUpdate_v2> {
  static void Run(CUresult r, CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo*) {
    OnGraphExecUpdated(exec, graph, r == CUDA_SUCCESS);
  }
};
template <>
struct After<HookId::k_cuGraphExecUpdate> {
  static void Run(CUresult r, CUgraphExec exec, CUgraph graph, CUgraphNode*,
                  CUgraphExecUpdateResult*) {
    OnGraphExecUpdated(exec, graph, r == CUDA_SUCCESS);
  }
};
template <HookId id>
struct AfterExecSetParams {
  template <typename Params>
  static void Run(CUresult r, CUgraphExec exec, CUgraphNode, Params) {
    if (r == CUDA_SUCCESS) OnGraphExecParamsChanged(exec, HookName(id).data());
  }
};
template <>
struct After<HookId::k_cuGraphExecKernelNodeSetParams_v2>
    : AfterExecSetParams<HookId::k_cuGraphExecKernelNodeSetParams_v2> {};
template <>
struct After<HookId::k_cuGraphExecKernelNodeSetParams>
    : AfterExecSetParams<HookId::k_cuGraphExecKernelNodeSetParams> {};
template <>
struct After<HookId::k_cuGraphExecNodeSetParams>
    : AfterExecSetParams<HookId::k_cuGraphExecNodeSetParams> {};
template <>
struct After<HookId::k_cuGraphExecChildGraphNodeSetParams>
    : AfterExecSetParams<HookId::k_cuGraphExecChildGraphNodeSetParams> {};

// What a hook does instead of the plain forward in run/record mode, per function. Default: none.
// Run(real, args...) makes the real call(s) itself and returns the result.
template <HookId id>
struct Replace {
  static constexpr bool kActive = false;
};

// The thread's capture interaction mode, as it sets it (the driver hands back the previous one).
template <>
struct Replace<HookId::k_cuThreadExchangeStreamCaptureMode> {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUstreamCaptureMode*), CUstreamCaptureMode* mode) {
    int wanted = -1;  // read as an int: the job may pass any value (the driver refuses it)
    if (mode != nullptr) std::memcpy(&wanted, mode, sizeof(wanted));
    const CUresult result = real(mode);
    if (result == CUDA_SUCCESS && wanted >= 0) CaptureTracker::OnThreadModeSet(wanted);
    return result;
  }
};

// A capture begins only while none of the shim's own calls is under way (CaptureTracker::
// NoCaptureScope): the real call and its bookkeeping (After) run under the tracker's gate.
template <HookId id>
struct ReplaceBeginCapture {
  static constexpr bool kActive = true;
  template <typename... Params, typename... Args>
  static CUresult Run(CUresult (*real)(Params...), Args... args) {
    return Captures().Begin([&] {
      const CUresult result = real(args...);
      After<id>::Run(result, args...);
      return result;
    });
  }
};
template <>
struct Replace<HookId::k_cuStreamBeginCapture_v2>
    : ReplaceBeginCapture<HookId::k_cuStreamBeginCapture_v2> {};
template <>
struct Replace<HookId::k_cuStreamBeginCapture_v2_ptsz>
    : ReplaceBeginCapture<HookId::k_cuStreamBeginCapture_v2_ptsz> {};
template <>
struct Replace<HookId::k_cuStreamBeginCaptureToGraph>
    : ReplaceBeginCapture<HookId::k_cuStreamBeginCaptureToGraph> {};
template <>
struct Replace<HookId::k_cuStreamBeginCaptureToGraph_ptsz>
    : ReplaceBeginCapture<HookId::k_cuStreamBeginCaptureToGraph_ptsz> {};

template <>
struct Replace<HookId::k_cuModuleUnload> : ReplaceUnload {};
template <>
struct Replace<HookId::k_cuLibraryUnload> : ReplaceUnload {};
// A context's end unloads its modules (as ReplaceUnload) and frees its memory, streams and events:
// the shim's engines and records follow (OnContextEnded). A primary context's handle is learned
// before its reset or release, while it is active; its end also makes the device's pools anew.
template <>
struct Replace<HookId::k_cuCtxDestroy_v2> {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUcontext), CUcontext context) {
    const CUresult result = ReplaceUnload::Run(real, context);
    if (result == CUDA_SUCCESS) OnContextEnded(context);
    return result;
  }
};
template <bool kRelease>
struct ReplacePrimaryEnd {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdevice), CUdevice device) {
    const CUcontext primary = ActivePrimaryContext(device);
    const CUresult result = ReplaceUnload::Run(real, device);
    // Only the last release ends the primary context.
    if (result == CUDA_SUCCESS && primary != nullptr &&
        (!kRelease || PrimaryContextInactive(device))) {
      OnContextEnded(primary);
      ForgetPools(device);
    }
    return result;
  }
};
template <>
struct Replace<HookId::k_cuDevicePrimaryCtxReset_v2> : ReplacePrimaryEnd<false> {};
template <>
struct Replace<HookId::k_cuDevicePrimaryCtxRelease_v2> : ReplacePrimaryEnd<true> {};

// Says `format` once per `flag` (and keeps it for the summary's errors).
#define SPILLWAY_REPORT_ONCE(flag, ...)                    \
  do {                                                     \
    static constinit std::atomic<bool> flag{false};        \
    if (!flag.exchange(true, std::memory_order_relaxed)) { \
      ReportProblem(LogLevel::kWarn, __VA_ARGS__);         \
    }                                                      \
  } while (0)

// Backs a device allocation of `bytes` with managed memory. False (nothing allocated) when the
// engine does not run or managed memory is refused: the caller then makes the real call.
bool AllocateManagedInstead(CUdeviceptr* dptr, uint64_t bytes) {
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

// Before a launch: resolve the access set and let the engine move data on `stream`.
void PrepareLaunch(CUfunction function, CUstream stream, void** kernel_params, void** extra,
                   bool per_thread) {
  LaunchRequest request;
  request.stream = stream;
  request.per_thread = per_thread;
  request.key = reinterpret_cast<uintptr_t>(function);
  request.pointers.kernel_params = kernel_params;
  request.pointers.extra = extra;
  request.function = function;
  PrepareLaunch(request);
}

template <bool kPerThread>
struct ReplaceLaunch {
  static constexpr bool kActive = true;
  template <typename Fn>
  static CUresult Run(Fn real, CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                      unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                      CUstream stream, void** params, void** extra) {
    PrepareLaunch(f, stream, params, extra, kPerThread);
    if (Recording()) StartKernelTiming();  // after the engine's waits: the kernel alone
    return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  }
  template <typename Fn>
  static CUresult Run(Fn real, CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                      unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                      CUstream stream, void** params) {
    PrepareLaunch(f, stream, params, nullptr, kPerThread);
    if (Recording()) StartKernelTiming();  // after the engine's waits: the kernel alone
    return real(f, gx, gy, gz, bx, by, bz, shared, stream, params);
  }
  template <typename Fn>
  static CUresult Run(Fn real, const CUlaunchConfig* config, CUfunction f, void** params,
                      void** extra) {
    PrepareLaunch(f, config != nullptr ? config->hStream : nullptr, params, extra, kPerThread);
    if (Recording()) StartKernelTiming();  // after the engine's waits: the kernel alone
    return real(config, f, params, extra);
  }
};
template <>
struct Replace<HookId::k_cuLaunchKernel> : ReplaceLaunch<false> {};
template <>
struct Replace<HookId::k_cuLaunchKernel_ptsz> : ReplaceLaunch<true> {};
template <>
struct Replace<HookId::k_cuLaunchKernelEx> : ReplaceLaunch<false> {};
template <>
struct Replace<HookId::k_cuLaunchKernelEx_ptsz> : ReplaceLaunch<true> {};
template <>
struct Replace<HookId::k_cuLaunchCooperativeKernel> : ReplaceLaunch<false> {};
template <>
struct Replace<HookId::k_cuLaunchCooperativeKernel_ptsz> : ReplaceLaunch<true> {};

// Before a memset or a copy writes every byte of [dst, dst + bytes): the whole chunks it
// overwrites that are not on the device are discarded on its stream, so its faults populate them
// without copying dead data in, and what it fills is brought in as for a launch (ResidencyEngine::
// OnOverwrite). Only for a range inside one managed allocation made on the current context's
// device (the engine's events belong to that device's context, the call's stream to the current
// one); nothing during a capture.
void PrepareOverwrite(CUdeviceptr dst, size_t bytes, policy::Stream stream) {
  CaptureTracker::NoCaptureScope scope(Captures());  // none begins before its calls are made
  if (bytes == 0 || !scope.admitted() || Captures().AnyInProgress()) return;
  const std::optional<policy::Allocation> found = Allocations().Find(dst);
  if (!found.has_value() || found->backing != policy::Backing::kManaged) return;
  if (found->device != CurrentDevice()) return;
  policy::ResidencyEngine* engine = EngineOf(found->device);
  if (engine == nullptr) return;
  if (EngineCallsFailed([&] { return engine->OnOverwrite(*found, dst, bytes, stream); })) {
    SPILLWAY_REPORT_ONCE(reported,
                         "a discard before a memset or copy failed; it copies the old "
                         "contents in");
  }
}

// A memset of `count` elements of T: only where the driver accepts the call as it is (aligned
// to the element size).
template <typename T>
void PrepareMemset(CUdeviceptr dst, size_t count, policy::Stream stream) {
  if (count > SIZE_MAX / sizeof(T) || dst % sizeof(T) != 0) return;
  PrepareOverwrite(dst, count * sizeof(T), stream);
}

// A copy of `bytes` from `src` into `dst`: only where the copy can read its source (a discard
// before a copy that then fails would lose what the job wrote): not null; where it lies in an
// allocation the shim tracks, inside it; for a device-to-device copy (`device_source`), in such an
// allocation (a host pointer there is refused without system-wide access); never where source and
// destination overlap.
void PrepareCopy(CUdeviceptr dst, uint64_t src, size_t bytes, bool device_source,
                 policy::Stream stream) {
  if (bytes == 0 || src == 0) return;
  if (src >= dst ? src - dst < bytes : dst - src < bytes) return;
  const std::optional<policy::Allocation> source = Allocations().Find(src);
  if (source.has_value() ? bytes > source->base + source->size - src : device_source) return;
  PrepareOverwrite(dst, bytes, stream);
}

// Synchronous copies into device memory (`kPerThread`: _ptds): cuMemcpy and cuMemcpyHtoD_v2
// (`kDeviceSource` false), cuMemcpyDtoD_v2 (true).
template <typename Src, bool kDeviceSource, bool kPerThread>
struct ReplaceCopy {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdeviceptr, Src, size_t), CUdeviceptr dst, Src src,
                      size_t bytes) {
    PrepareCopy(dst, record_hooks::Address(src), bytes, kDeviceSource,
                kPerThread ? CU_STREAM_PER_THREAD : nullptr);
    return real(dst, src, bytes);
  }
};
// Their Async forms (`kPerThread`: _ptsz).
template <typename Src, bool kDeviceSource, bool kPerThread>
struct ReplaceCopyAsync {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdeviceptr, Src, size_t, CUstream), CUdeviceptr dst,
                      Src src, size_t bytes, CUstream stream) {
    PrepareCopy(dst, record_hooks::Address(src), bytes, kDeviceSource,
                kPerThread && stream == nullptr ? CU_STREAM_PER_THREAD : stream);
    return real(dst, src, bytes, stream);
  }
};
template <>
struct Replace<HookId::k_cuMemcpy> : ReplaceCopy<CUdeviceptr, false, false> {};
template <>
struct Replace<HookId::k_cuMemcpy_ptds> : ReplaceCopy<CUdeviceptr, false, true> {};
template <>
struct Replace<HookId::k_cuMemcpyHtoD_v2> : ReplaceCopy<const void*, false, false> {};
template <>
struct Replace<HookId::k_cuMemcpyHtoD_v2_ptds> : ReplaceCopy<const void*, false, true> {};
template <>
struct Replace<HookId::k_cuMemcpyDtoD_v2> : ReplaceCopy<CUdeviceptr, true, false> {};
template <>
struct Replace<HookId::k_cuMemcpyDtoD_v2_ptds> : ReplaceCopy<CUdeviceptr, true, true> {};
template <>
struct Replace<HookId::k_cuMemcpyAsync> : ReplaceCopyAsync<CUdeviceptr, false, false> {};
template <>
struct Replace<HookId::k_cuMemcpyAsync_ptsz> : ReplaceCopyAsync<CUdeviceptr, false, true> {};
template <>
struct Replace<HookId::k_cuMemcpyHtoDAsync_v2> : ReplaceCopyAsync<const void*, false, false> {};
template <>
struct Replace<HookId::k_cuMemcpyHtoDAsync_v2_ptsz> : ReplaceCopyAsync<const void*, false, true> {};
template <>
struct Replace<HookId::k_cuMemcpyDtoDAsync_v2> : ReplaceCopyAsync<CUdeviceptr, true, false> {};
template <>
struct Replace<HookId::k_cuMemcpyDtoDAsync_v2_ptsz> : ReplaceCopyAsync<CUdeviceptr, true, true> {};

// cuMemsetD*_v2 (`kPerThread`: _ptds) on the null stream.
template <typename T, bool kPerThread>
struct ReplaceMemset {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdeviceptr, T, size_t), CUdeviceptr dst, T value,
                      size_t count) {
    PrepareMemset<T>(dst, count, kPerThread ? CU_STREAM_PER_THREAD : nullptr);
    return real(dst, value, count);
  }
};
// cuMemsetD*Async (`kPerThread`: _ptsz).
template <typename T, bool kPerThread>
struct ReplaceMemsetAsync {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUdeviceptr, T, size_t, CUstream), CUdeviceptr dst, T value,
                      size_t count, CUstream stream) {
    PrepareMemset<T>(dst, count, kPerThread && stream == nullptr ? CU_STREAM_PER_THREAD : stream);
    return real(dst, value, count, stream);
  }
};
template <>
struct Replace<HookId::k_cuMemsetD8_v2> : ReplaceMemset<unsigned char, false> {};
template <>
struct Replace<HookId::k_cuMemsetD8_v2_ptds> : ReplaceMemset<unsigned char, true> {};
template <>
struct Replace<HookId::k_cuMemsetD16_v2> : ReplaceMemset<unsigned short, false> {};
template <>
struct Replace<HookId::k_cuMemsetD16_v2_ptds> : ReplaceMemset<unsigned short, true> {};
template <>
struct Replace<HookId::k_cuMemsetD32_v2> : ReplaceMemset<unsigned int, false> {};
template <>
struct Replace<HookId::k_cuMemsetD32_v2_ptds> : ReplaceMemset<unsigned int, true> {};
template <>
struct Replace<HookId::k_cuMemsetD8Async> : ReplaceMemsetAsync<unsigned char, false> {};
template <>
struct Replace<HookId::k_cuMemsetD8Async_ptsz> : ReplaceMemsetAsync<unsigned char, true> {};
template <>
struct Replace<HookId::k_cuMemsetD16Async> : ReplaceMemsetAsync<unsigned short, false> {};
template <>
struct Replace<HookId::k_cuMemsetD16Async_ptsz> : ReplaceMemsetAsync<unsigned short, true> {};
template <>
struct Replace<HookId::k_cuMemsetD32Async> : ReplaceMemsetAsync<unsigned int, false> {};
template <>
struct Replace<HookId::k_cuMemsetD32Async_ptsz> : ReplaceMemsetAsync<unsigned int, true> {};

// Before a graph launch: the engine moves its kernel nodes' data (graph_hooks.cc).
template <bool kPerThread>
struct ReplaceGraphLaunch {
  static constexpr bool kActive = true;
  static CUresult Run(CUresult (*real)(CUgraphExec, CUstream), CUgraphExec exec, CUstream stream) {
    PrepareGraphLaunch(exec, stream, kPerThread);
    if (Recording()) StartKernelTiming();  // after the engine's waits: the graph alone
    return real(exec, stream);
  }
};
template <>
struct Replace<HookId::k_cuGraphLaunch> : ReplaceGraphLaunch<false> {};
template <>
struct Replace<HookId::k_cuGraphLaunch_ptsz> : ReplaceGraphLaunch<true> {};

// A hooked function the driver does not export: said once, then CUDA_ERROR_NOT_SUPPORTED.
constinit std::atomic<bool> g_missing_reported[kNumHooks];

CUresult Missing(int index) {
  if (!g_missing_reported[index].exchange(true, std::memory_order_relaxed)) {
    const std::string name(kHookInfo[index].name);
    ReportProblem(LogLevel::kWarn, "%s called but the driver does not export it", name.c_str());
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

template <typename Fn, typename... Args>
CUresult CallReal(int index, Args... args) {
  const Fn real = reinterpret_cast<Fn>(RealFunction(index));
  return real != nullptr ? real(args...) : CUDA_ERROR_NOT_INITIALIZED;
}

// The call in run and off mode: Replace<id> or the real function, then After<id>.
template <HookId id, typename Fn, typename... Args>
inline CUresult Dispatch(Fn real, Args... args) {
  if constexpr (Replace<id>::kActive) {
    if (EngineMode()) return Replace<id>::Run(real, args...);
  }
  const CUresult result = real(args...);
  if (CurrentMode() != Mode::kOff) After<id>::Run(result, args...);
  return result;
}

// The body of every generated hook. No lock, no allocation once the driver is resolved. In record
// mode, Record<id> wraps the call (record_hooks.h).
template <HookId id, typename Fn, typename... Args>
inline CUresult Intercept(Args... args) {
  constexpr int index = Index(id);
  if (ReentrancyGuard::Active()) return CallReal<Fn>(index, args...);
  ReentrancyGuard guard;
  if (!EnsureReady()) return CUDA_ERROR_NOT_INITIALIZED;
  const Fn real = reinterpret_cast<Fn>(RealFunction(index));
  if (real == nullptr) return Missing(index);
  CountCall(index);
  if constexpr (record_hooks::Record<id>::kActive) {
    if (Recording()) [[unlikely]] {
      return record_hooks::Record<id>::Run([&] { return Dispatch<id>(real, args...); }, args...);
    }
  }
  return Dispatch<id>(real, args...);
}

}  // namespace
}  // namespace spillway::interpose

// ---- generated hooks and their exported aliases ----

#define SPILLWAY_HOOK_CUSTOM(kind, name, params, args) \
  extern "C" SPILLWAY_HIDDEN CUresult spillway_hook_##name params;
#define SPILLWAY_HOOK(kind, name, params, args)                                      \
  extern "C" SPILLWAY_HIDDEN CUresult spillway_hook_##name params {                  \
    return ::spillway::interpose::Intercept<::spillway::interpose::HookId::k_##name, \
                                            CUresult(*) params>                      \
        args;                                                                        \
  }
#include "interpose/hooked_functions.inc"

#define SPILLWAY_HOOK(kind, name, params, args)                                    \
  extern "C" __attribute__((visibility("default"), alias("spillway_hook_" #name))) \
  CUresult name params;
#include "interpose/hooked_functions.inc"

namespace spillway::interpose {
namespace {

// Our hook for entry `index` of the list. A switch, not a table: a table of casted function
// pointers would need dynamic initialization, and dlsym may be called before that runs.
void* HookAddress(int index) {
  switch (index) {
#define SPILLWAY_HOOK(kind, name, params, args) \
  case Index(HookId::k_##name):                 \
    return reinterpret_cast<void*>(&spillway_hook_##name);
#include "interpose/hooked_functions.inc"
  }
  return nullptr;
}

// What cuGetProcAddress hands back: our hook when the driver's answer is a function we hook.
// cudart first asks for "cuGetProcAddress" itself; should the driver answer with an entry we do
// not list, the hook for the requested version is returned anyway, so later lookups come here.
void* Redirect(const char* symbol, void* real_answer, int cuda_version) {
  const int index = HookIndexOfReal(real_answer);
  if (index >= 0) return HookAddress(index);
  if (real_answer != nullptr && symbol != nullptr && std::strcmp(symbol, "cuGetProcAddress") == 0) {
    const HookId id =
        cuda_version >= 12000 ? HookId::k_cuGetProcAddress_v2 : HookId::k_cuGetProcAddress;
    return HookAddress(Index(id));
  }
  return real_answer;
}

template <HookId id, typename Fn, typename... Args>
CUresult InterceptProcAddress(const char* symbol, void** pfn, int cuda_version, Args... rest) {
  constexpr int index = Index(id);
  if (ReentrancyGuard::Active()) return CallReal<Fn>(index, symbol, pfn, cuda_version, rest...);
  ReentrancyGuard guard;
  if (!EnsureReady()) return CUDA_ERROR_NOT_INITIALIZED;
  const Fn real = reinterpret_cast<Fn>(RealFunction(index));
  if (real == nullptr) return Missing(index);
  CountCall(index);
  const CUresult result = real(symbol, pfn, cuda_version, rest...);
  if (result == CUDA_SUCCESS && pfn != nullptr) *pfn = Redirect(symbol, *pfn, cuda_version);
  return result;
}

}  // namespace
}  // namespace spillway::interpose

extern "C" CUresult spillway_hook_cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                                   cuuint64_t flags) {
  using Fn = CUresult (*)(const char*, void**, int, cuuint64_t);
  return spillway::interpose::InterceptProcAddress<spillway::interpose::HookId::k_cuGetProcAddress,
                                                   Fn>(symbol, pfn, cudaVersion, flags);
}

extern "C" CUresult spillway_hook_cuGetProcAddress_v2(const char* symbol, void** pfn,
                                                      int cudaVersion, cuuint64_t flags,
                                                      CUdriverProcAddressQueryResult* status) {
  using Fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  return spillway::interpose::InterceptProcAddress<
      spillway::interpose::HookId::k_cuGetProcAddress_v2, Fn>(symbol, pfn, cudaVersion, flags,
                                                              status);
}

// ---- dlsym ----
//
// glibc's dlsym takes the caller from its return address: RTLD_NEXT searches after the caller's
// object, RTLD_DEFAULT the caller's scope (a library loaded with RTLD_LOCAL finds its own
// dependencies' symbols there), and a found object becomes the caller's dependency. So the
// exported dlsym is a stub that jumps, the caller's return address intact, to the real dlsym for
// RTLD_NEXT and for every name that does not start with "cu"; only a "cu..." name through another
// handle goes to spillway_dlsym_impl, which asks the real dlsym and swaps the real driver's
// function for our hook (for those, the driver's entry points, the caller's scope finds the same
// libcuda.so.1).

extern "C" {
SPILLWAY_HIDDEN extern void* spillway_real_dlsym;
SPILLWAY_HIDDEN void* spillway_resolve_real_dlsym();
SPILLWAY_HIDDEN void* spillway_dlsym_impl(void* handle, const char* name);
}

namespace {

// The part of dlsym that may swap in a hook; only reached for names starting with "cu".
void* SubstituteHook(const char* name, void* answer) {
  using namespace spillway::interpose;
  if (ReentrancyGuard::Active()) return answer;
  const std::optional<HookId> id = FindHook(name);
  if (!id.has_value()) return answer;
  if (!EnsureReady(/*allow_load=*/false)) return answer;
  const int index = Index(*id);
  const void* real = RealFunction(index);
  if (real == answer) return HookAddress(index);
  // Spillway's own export (a search of the global scope, which finds it first) for an entry point
  // the loaded driver lacks (cuCtxSynchronize_v2 before CUDA 13): not found, as without spillway;
  // the export could only refuse.
  if (real == nullptr && answer == HookAddress(index)) return nullptr;
  return answer;
}

}  // namespace

// Uninstrumented, like the resolver: sanitizer runtimes look symbols up while they initialize.
__attribute__((no_sanitize("address", "undefined", "thread"))) void* spillway_dlsym_impl(
    void* handle, const char* name) {
  using DlsymFn = spillway::interpose::DlsymFn;
  void* real = __atomic_load_n(&spillway_real_dlsym, __ATOMIC_ACQUIRE);
  if (real == nullptr) real = spillway_resolve_real_dlsym();
  if (real == nullptr) return nullptr;
  void* answer = reinterpret_cast<DlsymFn>(real)(handle, name);
  if (answer == nullptr || name == nullptr || name[0] != 'c' || name[1] != 'u') return answer;
  return SubstituteHook(name, answer);
}

// x86-64 System V. RTLD_NEXT is ((void*)-1).
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    cmpq $-1, %rdi
    je 3f
    testq %rsi, %rsi
    jz 3f
    cmpb $0x63, (%rsi)
    jne 3f
    cmpb $0x75, 1(%rsi)
    je spillway_dlsym_impl
3:
    movq spillway_real_dlsym(%rip), %rax
    testq %rax, %rax
    jz 1f
    jmp *%rax
1:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call spillway_resolve_real_dlsym
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jz 2f
    jmp *%rax
2:
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
)");

// ---- load and exit ----

__attribute__((constructor)) static void SpillwayOnLoad() {
  spillway_resolve_real_dlsym();
  spillway::interpose::EnsureConfigured();
}

__attribute__((destructor)) static void SpillwayOnExit() {
  spillway::interpose::WriteSummaryAtExit();
  spillway::interpose::CloseTraceAtExit();
}
