// Access sets for CUDA graph launches: kernel nodes read at instantiation, resolved at launch.
#include "interpose/graph_hooks.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "interpose/backing.h"
#include "interpose/driver_device.h"
#include "interpose/launch_prep.h"
#include "interpose/log.h"
#include "interpose/record_hooks.h"
#include "interpose/recorder.h"
#include "interpose/runtime.h"
#include "interpose/unhooked_function.h"
#include "policy/front_door.h"

namespace spillway::interpose {
namespace {

using GetNodesFn = CUresult (*)(CUgraph, CUgraphNode*, size_t*);
using NodeTypeFn = CUresult (*)(CUgraphNode, CUgraphNodeType*);
using KernelParamsFn = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
using ChildGraphFn = CUresult (*)(CUgraphNode, CUgraph*);

constinit UnhookedFunction g_get_nodes{"cuGraphGetNodes", 10000};
constinit UnhookedFunction g_node_type{"cuGraphNodeGetType", 10000};
// At 12000: cuGraphKernelNodeGetParams_v2 (CUDA_KERNEL_NODE_PARAMS_v2).
constinit UnhookedFunction g_kernel_params{"cuGraphKernelNodeGetParams", 12000};
constinit UnhookedFunction g_child_graph{"cuGraphChildGraphNodeGetGraph", 10000};

// How deep child graphs are followed. The driver's own nesting is finite (a child node embeds a
// clone); the limit only guards against a driver that answers with a graph already being read.
constexpr int kMaxChildDepth = 16;

// SPILLWAY_GRAPH_ACCESS: 1 (default) or 0. Read once.
bool Enabled() {
  static const bool enabled = [] {
    const std::optional<std::string_view> value = GetEnv("SPILLWAY_GRAPH_ACCESS");
    if (!value.has_value() || value->empty() || *value == "1") return true;
    if (*value == "0") return false;
    const std::string text(*value);
    Log(LogLevel::kError, "SPILLWAY_GRAPH_ACCESS: cannot use '%s' (expected 0 or 1); using 1",
        text.c_str());
    return true;
  }();
  return enabled;
}

uint64_t Key(CUgraphExec exec) { return reinterpret_cast<uintptr_t>(exec); }

// A kernel node's launch handle: its CUfunction, or its CUkernel where `func` is NULL (cuda.h:
// `kern` "will only be referenced if func is NULL").
void* NodeFunction(const CUDA_KERNEL_NODE_PARAMS& params) {
  return params.func != nullptr ? static_cast<void*>(params.func) : static_cast<void*>(params.kern);
}

// The words of one kernel node that point into a live allocation.
std::vector<uint64_t> NodeWords(const CUDA_KERNEL_NODE_PARAMS& params) {
  policy::AccessSet access;
  std::vector<uint64_t> words;
  void* function = NodeFunction(params);
  if (params.kernelParams != nullptr && function != nullptr) {
    if (const std::vector<policy::ParamInfo>* layout = ParamLayoutOf(function)) {
      policy::ResolveFromKernelParams(Allocations(), *layout, params.kernelParams, &access, &words);
    }
  } else if (params.extra != nullptr) {
    policy::ResolveFromExtra(Allocations(), params.extra, &access, &words);
  }
  std::vector<uint64_t> kept;
  for (const uint64_t word : words) {
    for (const policy::Allocation& allocation : access) {
      if (allocation.Contains(word)) {
        kept.push_back(word);
        break;
      }
    }
  }
  return kept;
}

// Appends the kernel nodes of `graph` to `kernels` in the driver's node order, a child graph's
// kernels in place of its node, `depth` levels down. False when they cannot be read.
bool ReadKernelNodes(CUgraph graph, int depth, std::vector<GraphKernelNode>* kernels) {
  const auto get_nodes = Lookup<GetNodesFn>(g_get_nodes);
  const auto node_type = Lookup<NodeTypeFn>(g_node_type);
  const auto kernel_params = Lookup<KernelParamsFn>(g_kernel_params);
  if (get_nodes == nullptr || node_type == nullptr || kernel_params == nullptr) return false;
  size_t count = 0;
  if (get_nodes(graph, nullptr, &count) != CUDA_SUCCESS) return false;
  std::vector<CUgraphNode> nodes(count);
  if (count > 0 && get_nodes(graph, nodes.data(), &count) != CUDA_SUCCESS) return false;
  nodes.resize(std::min(count, nodes.size()));
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    if (node_type(node, &type) != CUDA_SUCCESS) return false;
    if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
      // A driver without the query, or nesting past the limit: the child's kernels are left out
      // of the access set and demand-paged.
      const auto child_graph = Lookup<ChildGraphFn>(g_child_graph);
      CUgraph child = nullptr;
      if (child_graph == nullptr || depth >= kMaxChildDepth) continue;
      if (child_graph(node, &child) != CUDA_SUCCESS || child == nullptr) return false;
      if (!ReadKernelNodes(child, depth + 1, kernels)) return false;
      continue;
    }
    // Conditional nodes' bodies may or may not run: not part of the access set.
    if (type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    CUDA_KERNEL_NODE_PARAMS params{};
    if (kernel_params(node, &params) != CUDA_SUCCESS) return false;
    kernels->push_back(
        GraphKernelNode{reinterpret_cast<uintptr_t>(NodeFunction(params)), NodeWords(params)});
  }
  return true;
}

}  // namespace

GraphAccessTable& GraphAccess() {
  static GraphAccessTable* table = new GraphAccessTable;  // never destroyed: used until exit
  return *table;
}

void OnGraphInstantiated(CUgraphExec exec, CUgraph graph) {
  if (exec == nullptr || !Enabled()) return;
  std::vector<GraphKernelNode> nodes;
  if (!ReadKernelNodes(graph, 0, &nodes)) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed)) {
      Log(LogLevel::kWarn,
          "cannot read the kernel nodes of an instantiated graph; launches of such graphs get "
          "no access set (demand paging)");
    }
    GraphAccess().Forget(Key(exec));
    return;
  }
  GraphAccess().Remember(Key(exec), std::move(nodes));
}

void OnGraphExecUpdated(CUgraphExec exec, CUgraph graph, bool succeeded) {
  if (exec == nullptr || !Enabled()) return;
  if (succeeded) {
    OnGraphInstantiated(exec, graph);
  } else {
    OnGraphExecParamsChanged(exec, "a failed cuGraphExecUpdate");
  }
}

void OnGraphExecParamsChanged(CUgraphExec exec, const char* how) {
  if (exec == nullptr || !Enabled()) return;
  if (GraphAccess().MarkStale(Key(exec))) {
    Log(LogLevel::kInfo,
        "graph exec %p changed by %s: its launches get no access set from now on (demand "
        "paging)",
        static_cast<void*>(exec), how);
  }
}

void OnGraphExecDestroyed(CUgraphExec exec) { GraphAccess().Forget(Key(exec)); }

void PrepareGraphLaunch(CUgraphExec exec, CUstream stream, bool per_thread) {
  if (!Enabled()) return;
  LaunchRequest request;
  request.stream = stream;
  request.per_thread = per_thread;
  request.key = Key(exec);
  // The words of its kernel nodes (resolved again at the launch: an allocation freed since
  // instantiation is not named); none when the exec is unknown or stale.
  request.graph_words = [](uint64_t key, std::vector<uint64_t>* words) {
    size_t kernel_nodes = 0;
    return GraphAccess().Words(key, words, &kernel_nodes) == GraphAccessTable::State::kKnown;
  };
  PrepareLaunch(request);
}

}  // namespace spillway::interpose
