// The hooks of module unloads and context ends: what is cached by handle is forgotten, and a
// context's end retires its engines and forgets its allocations. Included by hooks.cc only.
#ifndef SPILLWAY_INTERPOSE_HOOKS_CONTEXT_H_
#define SPILLWAY_INTERPOSE_HOOKS_CONTEXT_H_

#include "interpose/hooks_common.h"

namespace spillway::interpose {

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

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_HOOKS_CONTEXT_H_
