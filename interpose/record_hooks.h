// What each hook adds in record mode (interpose/recorder.h), per hooked function: Record<id>::Run
// gets the call itself as `dispatch` (the run-mode path, Replace or plain forward) and the hook's
// arguments, makes the call and writes what it did. Included by hooks.cc only.
#ifndef SPILLWAY_INTERPOSE_RECORD_HOOKS_H_
#define SPILLWAY_INTERPOSE_RECORD_HOOKS_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "interpose/cupti_bridge.h"
#include "interpose/hook_table.h"
#include "interpose/recorder.h"
#include "interpose/runtime.h"
#include "policy/front_door.h"

namespace spillway::interpose::record_hooks {

// The access set the launch path resolved for this thread's current launch (filled by hooks.cc's
// PrepareLaunch, or graph_hooks.cc's PrepareGraphLaunch for a graph launch; read after the launch
// by the recorder). Keeps its capacity.
inline policy::AccessSet& LaunchAccessSet() {
  thread_local policy::AccessSet access;
  return access;
}
// The candidate pointer words the resolver looked up for that launch, in parameter order.
inline std::vector<uint64_t>& LaunchWords() {
  thread_local std::vector<uint64_t> words;
  return words;
}

inline uint64_t Address(CUdeviceptr address) { return address; }
inline uint64_t Address(const void* address) { return reinterpret_cast<uintptr_t>(address); }

template <bool kPerThread>
uint64_t StreamOf(CUstream stream) {
  if (kPerThread && stream == nullptr) stream = CU_STREAM_PER_THREAD;
  return reinterpret_cast<uintptr_t>(stream);
}

// Default: nothing recorded.
template <HookId id>
struct Record {
  static constexpr bool kActive = false;
};

// ---- allocations and frees ----

// Writes the allocation the registry now holds at `address` (the run path registered it).
inline void RecordRegistered(uint64_t address, uint64_t stream) {
  const std::optional<policy::Allocation> found = Allocations().Find(address);
  if (!found.has_value() || found->base != address) return;
  const trace::AllocKind kind = found->stream_ordered ? trace::AllocKind::kAsync
                                : found->backing == policy::Backing::kManaged
                                    ? trace::AllocKind::kManaged
                                    : trace::AllocKind::kDevice;
  RecordAlloc(address, found->size, kind, stream, found->id);
}

struct RecordSyncAlloc {
  static constexpr bool kActive = true;
  template <typename Dispatch, typename... Rest>
  static CUresult Run(Dispatch dispatch, CUdeviceptr* dptr, Rest...) {
    const CUresult result = dispatch();
    if (result == CUDA_SUCCESS && dptr != nullptr) RecordRegistered(*dptr, 0);
    return result;
  }
};
template <>
struct Record<HookId::k_cuMemAlloc_v2> : RecordSyncAlloc {};
template <>
struct Record<HookId::k_cuMemAllocPitch_v2> : RecordSyncAlloc {};
template <>
struct Record<HookId::k_cuMemAllocManaged> : RecordSyncAlloc {};

template <bool kPerThread>
struct RecordAsyncAlloc {
  static constexpr bool kActive = true;
  template <typename Dispatch>
  static CUresult Run(Dispatch dispatch, CUdeviceptr* dptr, size_t, CUstream stream) {
    const CUresult result = dispatch();
    if (result == CUDA_SUCCESS && dptr != nullptr) {
      RecordRegistered(*dptr, StreamOf<kPerThread>(stream));
    }
    return result;
  }
  template <typename Dispatch>
  static CUresult Run(Dispatch dispatch, CUdeviceptr* dptr, size_t bytes, CUmemoryPool,
                      CUstream stream) {
    return Run(dispatch, dptr, bytes, stream);
  }
};
template <>
struct Record<HookId::k_cuMemAllocAsync> : RecordAsyncAlloc<false> {};
template <>
struct Record<HookId::k_cuMemAllocAsync_ptsz> : RecordAsyncAlloc<true> {};
template <>
struct Record<HookId::k_cuMemAllocFromPoolAsync> : RecordAsyncAlloc<false> {};
template <>
struct Record<HookId::k_cuMemAllocFromPoolAsync_ptsz> : RecordAsyncAlloc<true> {};

template <bool kPerThread>
struct RecordFreeCall {
  static constexpr bool kActive = true;
  template <typename Dispatch>
  static CUresult Run(Dispatch dispatch, CUdeviceptr dptr, CUstream stream = nullptr) {
    const std::optional<policy::Allocation> found = Allocations().Find(dptr);
    const CUresult result = dispatch();
    if (result == CUDA_SUCCESS && found.has_value() && found->base == dptr) {
      RecordFree(dptr, found->id, StreamOf<kPerThread>(stream));
    }
    return result;
  }
};
template <>
struct Record<HookId::k_cuMemFree_v2> : RecordFreeCall<false> {};
template <>
struct Record<HookId::k_cuMemFreeAsync> : RecordFreeCall<false> {};
template <>
struct Record<HookId::k_cuMemFreeAsync_ptsz> : RecordFreeCall<true> {};

// ---- launches ----

template <bool kPerThread>
struct RecordLaunch {
  static constexpr bool kActive = true;
  template <typename Dispatch>
  static CUresult Timed(Dispatch dispatch, const LaunchShape& shape) {
    const uint64_t correlation = BeginLaunch(shape.stream);
    LaunchAccessSet().clear();
    LaunchWords().clear();
    CUresult result;
    {
      CorrelationScope scope(correlation);
      result = dispatch();
    }
    EndLaunch(correlation, result == CUDA_SUCCESS, shape, LaunchAccessSet(), LaunchWords());
    return result;
  }
  template <typename Dispatch, typename... Params>
  static CUresult Run(Dispatch dispatch, CUfunction f, unsigned int gx, unsigned int gy,
                      unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz,
                      unsigned int shared, CUstream stream, Params...) {
    return Timed(dispatch,
                 LaunchShape{f, {gx, gy, gz}, {bx, by, bz}, shared, StreamOf<kPerThread>(stream)});
  }
  template <typename Dispatch>
  static CUresult Run(Dispatch dispatch, const CUlaunchConfig* config, CUfunction f, void**,
                      void**) {
    if (config == nullptr) return dispatch();
    return Timed(dispatch, LaunchShape{f,
                                       {config->gridDimX, config->gridDimY, config->gridDimZ},
                                       {config->blockDimX, config->blockDimY, config->blockDimZ},
                                       config->sharedMemBytes,
                                       StreamOf<kPerThread>(config->hStream)});
  }
};
template <>
struct Record<HookId::k_cuLaunchKernel> : RecordLaunch<false> {};
template <>
struct Record<HookId::k_cuLaunchKernel_ptsz> : RecordLaunch<true> {};
template <>
struct Record<HookId::k_cuLaunchKernelEx> : RecordLaunch<false> {};
template <>
struct Record<HookId::k_cuLaunchKernelEx_ptsz> : RecordLaunch<true> {};
template <>
struct Record<HookId::k_cuLaunchCooperativeKernel> : RecordLaunch<false> {};
template <>
struct Record<HookId::k_cuLaunchCooperativeKernel_ptsz> : RecordLaunch<true> {};

template <bool kPerThread>
struct RecordGraph {
  static constexpr bool kActive = true;
  template <typename Dispatch>
  static CUresult Run(Dispatch dispatch, CUgraphExec exec, CUstream stream) {
    const uint64_t on = StreamOf<kPerThread>(stream);
    const uint64_t correlation = BeginLaunch(on);
    LaunchAccessSet().clear();  // filled by graph_hooks.cc's PrepareGraphLaunch
    LaunchWords().clear();
    CUresult result;
    {
      CorrelationScope scope(correlation);
      result = dispatch();
    }
    EndGraphLaunch(correlation, result == CUDA_SUCCESS, reinterpret_cast<uintptr_t>(exec), on,
                   LaunchAccessSet(), LaunchWords());
    return result;
  }
};
template <>
struct Record<HookId::k_cuGraphLaunch> : RecordGraph<false> {};
template <>
struct Record<HookId::k_cuGraphLaunch_ptsz> : RecordGraph<true> {};

// ---- module loads ----

struct RecordLoad {
  static constexpr bool kActive = true;
  template <typename Dispatch, typename Handle, typename... Rest>
  static CUresult Run(Dispatch dispatch, Handle* handle, const char* name, Rest...) {
    const CUresult result = dispatch();
    if (result == CUDA_SUCCESS && handle != nullptr) {
      RecordModuleLoad(reinterpret_cast<uintptr_t>(*handle), name);
    }
    return result;
  }
};
template <>
struct Record<HookId::k_cuModuleLoad> : RecordLoad {};
template <>
struct Record<HookId::k_cuLibraryLoadFromFile> : RecordLoad {};

// ---- copies and fills ----

template <trace::CopyDirection kDirection, bool kPerThread>
struct RecordCopy {
  static constexpr bool kActive = true;
  template <typename Dispatch, typename Dst, typename Src>
  static CUresult Run(Dispatch dispatch, Dst dst, Src src, size_t bytes) {
    const CUresult result = dispatch();
    if (result == CUDA_SUCCESS) {
      RecordMemcpy(kDirection, false, Address(dst), Address(src), bytes,
                   kPerThread ? StreamOf<true>(nullptr) : 0);
    }
    return result;
  }
  template <typename Dispatch, typename Dst, typename Src>
  static CUresult Run(Dispatch dispatch, Dst dst, Src src, size_t bytes, CUstream stream) {
    const CUresult result = dispatch();
    if (result == CUDA_SUCCESS) {
      RecordMemcpy(kDirection, true, Address(dst), Address(src), bytes,
                   StreamOf<kPerThread>(stream));
    }
    return result;
  }
};
using trace::CopyDirection;
template <>
struct Record<HookId::k_cuMemcpy> : RecordCopy<CopyDirection::kDefault, false> {};
template <>
struct Record<HookId::k_cuMemcpy_ptds> : RecordCopy<CopyDirection::kDefault, true> {};
template <>
struct Record<HookId::k_cuMemcpyAsync> : RecordCopy<CopyDirection::kDefault, false> {};
template <>
struct Record<HookId::k_cuMemcpyAsync_ptsz> : RecordCopy<CopyDirection::kDefault, true> {};
template <>
struct Record<HookId::k_cuMemcpyHtoD_v2> : RecordCopy<CopyDirection::kHostToDevice, false> {};
template <>
struct Record<HookId::k_cuMemcpyHtoD_v2_ptds> : RecordCopy<CopyDirection::kHostToDevice, true> {};
template <>
struct Record<HookId::k_cuMemcpyDtoH_v2> : RecordCopy<CopyDirection::kDeviceToHost, false> {};
template <>
struct Record<HookId::k_cuMemcpyDtoH_v2_ptds> : RecordCopy<CopyDirection::kDeviceToHost, true> {};
template <>
struct Record<HookId::k_cuMemcpyDtoD_v2> : RecordCopy<CopyDirection::kDeviceToDevice, false> {};
template <>
struct Record<HookId::k_cuMemcpyDtoD_v2_ptds> : RecordCopy<CopyDirection::kDeviceToDevice, true> {};
template <>
struct Record<HookId::k_cuMemcpyHtoDAsync_v2> : RecordCopy<CopyDirection::kHostToDevice, false> {};
template <>
struct Record<HookId::k_cuMemcpyHtoDAsync_v2_ptsz>
    : RecordCopy<CopyDirection::kHostToDevice, true> {};
template <>
struct Record<HookId::k_cuMemcpyDtoHAsync_v2> : RecordCopy<CopyDirection::kDeviceToHost, false> {};
template <>
struct Record<HookId::k_cuMemcpyDtoHAsync_v2_ptsz>
    : RecordCopy<CopyDirection::kDeviceToHost, true> {};
template <>
struct Record<HookId::k_cuMemcpyDtoDAsync_v2> : RecordCopy<CopyDirection::kDeviceToDevice, false> {
};
template <>
struct Record<HookId::k_cuMemcpyDtoDAsync_v2_ptsz>
    : RecordCopy<CopyDirection::kDeviceToDevice, true> {};

template <uint32_t kElementBytes, bool kPerThread>
struct RecordFill {
  static constexpr bool kActive = true;
  template <typename Dispatch, typename Value>
  static CUresult Run(Dispatch dispatch, CUdeviceptr dst, Value value, size_t count) {
    const CUresult result = dispatch();
    if (result == CUDA_SUCCESS) {
      RecordMemset(false, dst, uint64_t{count} * kElementBytes, value, kElementBytes,
                   kPerThread ? StreamOf<true>(nullptr) : 0);
    }
    return result;
  }
  template <typename Dispatch, typename Value>
  static CUresult Run(Dispatch dispatch, CUdeviceptr dst, Value value, size_t count,
                      CUstream stream) {
    const CUresult result = dispatch();
    if (result == CUDA_SUCCESS) {
      RecordMemset(true, dst, uint64_t{count} * kElementBytes, value, kElementBytes,
                   StreamOf<kPerThread>(stream));
    }
    return result;
  }
};
template <>
struct Record<HookId::k_cuMemsetD8_v2> : RecordFill<1, false> {};
template <>
struct Record<HookId::k_cuMemsetD8_v2_ptds> : RecordFill<1, true> {};
template <>
struct Record<HookId::k_cuMemsetD16_v2> : RecordFill<2, false> {};
template <>
struct Record<HookId::k_cuMemsetD16_v2_ptds> : RecordFill<2, true> {};
template <>
struct Record<HookId::k_cuMemsetD32_v2> : RecordFill<4, false> {};
template <>
struct Record<HookId::k_cuMemsetD32_v2_ptds> : RecordFill<4, true> {};
template <>
struct Record<HookId::k_cuMemsetD8Async> : RecordFill<1, false> {};
template <>
struct Record<HookId::k_cuMemsetD8Async_ptsz> : RecordFill<1, true> {};
template <>
struct Record<HookId::k_cuMemsetD16Async> : RecordFill<2, false> {};
template <>
struct Record<HookId::k_cuMemsetD16Async_ptsz> : RecordFill<2, true> {};
template <>
struct Record<HookId::k_cuMemsetD32Async> : RecordFill<4, false> {};
template <>
struct Record<HookId::k_cuMemsetD32Async_ptsz> : RecordFill<4, true> {};

// ---- synchronizations (also where kernel times are collected) ----

template <bool kPerThread>
struct RecordWait {
  static constexpr bool kActive = true;
  template <typename Dispatch>
  static CUresult Run(Dispatch dispatch) {
    const uint64_t start = RecordClockNs();
    const CUresult result = dispatch();
    RecordSynchronize(trace::SyncWhat::kContext, 0, start);
    return result;
  }
  // cuCtxSynchronize_v2: recorded as cuCtxSynchronize is (a context's wait; no handle).
  template <typename Dispatch>
  static CUresult Run(Dispatch dispatch, CUcontext) {
    return Run(dispatch);
  }
  template <typename Dispatch>
  static CUresult Run(Dispatch dispatch, CUstream stream) {
    const uint64_t start = RecordClockNs();
    const CUresult result = dispatch();
    RecordSynchronize(trace::SyncWhat::kStream, StreamOf<kPerThread>(stream), start);
    return result;
  }
  template <typename Dispatch>
  static CUresult Run(Dispatch dispatch, CUevent event) {
    const uint64_t start = RecordClockNs();
    const CUresult result = dispatch();
    RecordSynchronize(trace::SyncWhat::kEvent, reinterpret_cast<uintptr_t>(event), start);
    return result;
  }
};
template <>
struct Record<HookId::k_cuCtxSynchronize> : RecordWait<false> {};
template <>
struct Record<HookId::k_cuCtxSynchronize_v2> : RecordWait<false> {};
template <>
struct Record<HookId::k_cuStreamSynchronize> : RecordWait<false> {};
template <>
struct Record<HookId::k_cuStreamSynchronize_ptsz> : RecordWait<true> {};
template <>
struct Record<HookId::k_cuEventSynchronize> : RecordWait<false> {};

}  // namespace spillway::interpose::record_hooks

#endif  // SPILLWAY_INTERPOSE_RECORD_HOOKS_H_
