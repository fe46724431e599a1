// The hooks of memsets and copies into managed memory: the whole chunks they overwrite that are
// off the device are discarded first, and what they fill is brought in as for a launch.
// Included by hooks.cc only.
#ifndef SPILLWAY_INTERPOSE_HOOKS_COPY_H_
#define SPILLWAY_INTERPOSE_HOOKS_COPY_H_

#include "interpose/hooks_common.h"

namespace spillway::interpose {

// Before a memset or a copy writes every byte of [dst, dst + bytes): the whole chunks it
// overwrites that are not on the device are discarded on its stream, so its faults populate them
// without copying dead data in, and what it fills is brought in as for a launch (ResidencyEngine::
// OnOverwrite). Only for a range inside one managed allocation made on the current context's
// device (the engine's events belong to that device's context, the call's stream to the current
// one); nothing during a capture.
inline void PrepareOverwrite(CUdeviceptr dst, size_t bytes, policy::Stream stream) {
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
inline void PrepareCopy(CUdeviceptr dst, uint64_t src, size_t bytes, bool device_source,
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

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_HOOKS_COPY_H_
