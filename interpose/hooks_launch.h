// The launch hooks, kernels' and graphs': the engine moves the launch's data first
// (launch_prep.h), then, in record mode, the kernel alone is timed. Included by hooks.cc only.
#ifndef SPILLWAY_INTERPOSE_HOOKS_LAUNCH_H_
#define SPILLWAY_INTERPOSE_HOOKS_LAUNCH_H_

#include "interpose/hooks_common.h"

namespace spillway::interpose {

// Before a launch: resolve the access set and let the engine move data on `stream`.
inline void PrepareLaunch(CUfunction function, CUstream stream, void** kernel_params, void** extra,
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

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_HOOKS_LAUNCH_H_
