// The hooks of stream captures and CUDA graphs: captures tracked (allocations made meanwhile stay
// device memory, the engine's calls are held back), and each instantiated graph's kernel nodes
// read for their access sets (graph_hooks.h). Included by hooks.cc only.
#ifndef SPILLWAY_INTERPOSE_HOOKS_GRAPH_H_
#define SPILLWAY_INTERPOSE_HOOKS_GRAPH_H_

#include "interpose/hooks_common.h"

namespace spillway::interpose {

// Stream captures: allocations the capturing thread makes meanwhile stay device memory.
inline const void* CaptureKey(CUstream stream, bool per_thread) {
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

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_HOOKS_GRAPH_H_
