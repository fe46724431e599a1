// CUDA graphs and stream capture: kernel, empty and child-graph nodes, built by cuGraphAdd*Node or
// by capturing kernel launches on a stream; instantiated into an executable graph that runs its
// kernel nodes (a child graph's in its place) on a stream, one after another in an order that
// respects the dependencies, on the virtual clock like ordinary launches. Other node types are
// refused with CUDA_ERROR_NOT_SUPPORTED (said once on stderr), so a job never believes simgpu ran
// them.
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "simgpu_internal.h"

namespace simgpu {
namespace {

struct Graph;

struct Node {
  Graph* graph = nullptr;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  std::vector<Node*> deps;
  // Kernel nodes: the function, the geometry and the packed parameter values.
  Function* fn = nullptr;
  bool by_kernel = false;  // made from a CUkernel (`kern`, `func` NULL): handed back that way
  LaunchDims dims{};
  std::vector<char> buffer;
  std::vector<void*> args;  // parameter i's address in `buffer` (what GetParams hands out)
  // Child-graph nodes: the embedded graph, owned by the node (destroyed with it).
  Graph* child = nullptr;
};

// Nodes can only depend on nodes that exist already (no cuGraphAddDependencies), so creation
// order is a topological order.
struct Graph {
  std::vector<std::unique_ptr<Node>> nodes;
  // Set when the graph is embedded in a child-graph node: the job may read and change it through
  // cuGraphChildGraphNodeGetGraph, not destroy it. `moved`: it was the job's own graph, handed
  // over with CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE (not instantiated on its own either).
  const Node* owner = nullptr;
  bool moved = false;
  // A capture made a memory node in it (cuMemAllocAsync): it can be moved into a child-graph
  // node, not cloned.
  bool memory_nodes = false;
};

struct ExecNode {
  const Node* origin = nullptr;  // the node of the graph it was instantiated from (a handle only)
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  std::vector<size_t> deps;  // indices into Exec::nodes
  size_t span = 0;           // child-graph nodes: how many exec nodes of the child follow this one
  const SimgpuKernel* kernel = nullptr;
  LaunchDims dims{};
  std::shared_ptr<const std::vector<char>> buffer;
};

struct Exec {
  // In creation order of the source graph; a child graph's nodes follow its node, flattened.
  std::vector<ExecNode> nodes;
  MarkerPtr last;  // the previous launch's last kernel: launches do not overlap
};

struct Capture {
  Graph* graph = nullptr;
  Node* last = nullptr;
  std::thread::id thread;
  int mode = 0;
};

std::mutex* g_mu = new std::mutex();
std::set<Graph*>* g_graphs = new std::set<Graph*>();           // guarded by g_mu
std::set<const Node*>* g_nodes = new std::set<const Node*>();  // guarded by g_mu
std::set<Exec*>* g_execs = new std::set<Exec*>();              // guarded by g_mu
std::unordered_map<Stream*, Capture>* g_captures = new std::unordered_map<Stream*, Capture>();
std::atomic<int> g_strict_captures{0};  // captures in g_captures not in relaxed mode
// The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode).
thread_local int t_interaction_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

Graph* LiveGraph(CUgraph h) {  // REQUIRES: g_mu held
  Graph* g = reinterpret_cast<Graph*>(h);
  return g_graphs->count(g) ? g : nullptr;
}
Node* LiveNode(CUgraphNode h) {  // REQUIRES: g_mu held
  Node* n = reinterpret_cast<Node*>(h);
  return g_nodes->count(n) ? n : nullptr;
}
Exec* LiveExec(CUgraphExec h) {  // REQUIRES: g_mu held
  Exec* e = reinterpret_cast<Exec*>(h);
  return g_execs->count(e) ? e : nullptr;
}

// Says once per call site that a graph feature is not simulated.
#define SIMGPU_GRAPH_UNSUPPORTED(what)                                                      \
  do {                                                                                      \
    static std::atomic<bool> said{false};                                                   \
    if (!said.exchange(true)) {                                                             \
      std::fprintf(stderr, "simgpu: %s: %s are not simulated (CUDA_ERROR_NOT_SUPPORTED)\n", \
                   __func__, what);                                                         \
    }                                                                                       \
    return CUDA_ERROR_NOT_SUPPORTED;                                                        \
  } while (0)

// What a kernel node is made of, from any of the kernel-node parameter structs.
struct KernelSpec {
  CUfunction func = nullptr;
  CUkernel kern = nullptr;
  LaunchDims dims{};
  void** params = nullptr;
  void** extra = nullptr;
};

template <typename P>
KernelSpec SpecOf(const P& p) {
  KernelSpec s;
  s.func = p.func;
  s.dims = LaunchDims{{p.gridDimX, p.gridDimY, p.gridDimZ},
                      {p.blockDimX, p.blockDimY, p.blockDimZ},
                      p.sharedMemBytes};
  s.params = p.kernelParams;
  s.extra = p.extra;
  return s;
}
template <typename P>
KernelSpec SpecWithKernel(const P& p) {
  KernelSpec s = SpecOf(p);
  s.kern = p.kern;
  return s;
}

// Fills a kernel node's function, geometry and parameter values from `spec`.
CUresult SetKernel(Node* n, const KernelSpec& spec) {
  // cuda.h: `kern` "will only be referenced if func is NULL".
  Function* fn = spec.func != nullptr ? LiveFunctionOf(spec.func) : LiveKernelOf(spec.kern);
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckLaunchDims(spec.dims)) return r;
  std::vector<char> buffer;
  if (CUresult r = PackKernelParams(fn->kernel, spec.params, spec.extra, &buffer)) return r;
  n->type = CU_GRAPH_NODE_TYPE_KERNEL;
  n->fn = fn;
  n->by_kernel = spec.func == nullptr;
  n->dims = spec.dims;
  n->buffer = std::move(buffer);
  n->args.assign(fn->kernel->num_params, nullptr);
  for (unsigned i = 0; i < fn->kernel->num_params; ++i) {
    n->args[i] = n->buffer.data() + fn->kernel->params[i].offset;
  }
  return CUDA_SUCCESS;
}

bool BeingCaptured(const Graph* g) {  // REQUIRES: g_mu held
  for (const auto& c : *g_captures) {
    if (c.second.graph == g) return true;
  }
  return false;
}

Graph* CloneGraphLocked(const Graph& source);

// The graph a new child-graph node of `parent` embeds: a clone of `source`, or `source` itself
// when moved. Null when `source` cannot be embedded there.
Graph* EmbeddedGraph(Graph* parent, CUgraph source_handle, bool move) {  // REQUIRES: g_mu held
  Graph* source = LiveGraph(source_handle);
  if (source == nullptr || source->moved || BeingCaptured(source)) return nullptr;
  if (!move) return source->memory_nodes ? nullptr : CloneGraphLocked(*source);
  // A moved graph must be the job's own, and not `parent` or a graph `parent` is embedded in.
  if (source->owner != nullptr) return nullptr;
  for (const Graph* g = parent; g != nullptr; g = g->owner != nullptr ? g->owner->graph : nullptr) {
    if (g == source) return nullptr;
  }
  source->moved = true;
  return source;
}

// Adds a node of `type` (kernel: from `spec`; child graph: embedding `child`, cloned or moved)
// to graph `h` after `deps`.
CUresult AddNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, size_t count,
                 CUgraphNodeType type, const KernelSpec* spec, CUgraph child = nullptr,
                 bool move = false) {
  SIMGPU_REQUIRE_CTX();
  if (out == nullptr || (count > 0 && deps == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_mu);
  Graph* g = LiveGraph(h);
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto node = std::make_unique<Node>();
  node->graph = g;
  node->type = type;
  for (size_t i = 0; i < count; ++i) {
    Node* d = LiveNode(deps[i]);
    if (d == nullptr || d->graph != g) return CUDA_ERROR_INVALID_VALUE;
    for (Node* seen : node->deps) {
      if (seen == d) return CUDA_ERROR_INVALID_VALUE;  // duplicate dependency
    }
    node->deps.push_back(d);
  }
  if (spec != nullptr) {
    if (CUresult r = SetKernel(node.get(), *spec)) return r;
  }
  if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
    node->child = EmbeddedGraph(g, child, move);
    if (node->child == nullptr) return CUDA_ERROR_INVALID_VALUE;
    node->child->owner = node.get();
  }
  *out = reinterpret_cast<CUgraphNode>(node.get());
  g_nodes->insert(node.get());
  g->nodes.push_back(std::move(node));
  return CUDA_SUCCESS;
}

// A new graph with `source`'s nodes, dependencies and parameters (child graphs cloned too).
Graph* CloneGraphLocked(const Graph& source) {  // REQUIRES: g_mu held
  Graph* g = new Graph();
  g_graphs->insert(g);
  std::unordered_map<const Node*, Node*> copies;
  for (const auto& n : source.nodes) {
    auto node = std::make_unique<Node>();
    node->graph = g;
    node->type = n->type;
    for (const Node* d : n->deps) node->deps.push_back(copies.at(d));
    node->fn = n->fn;
    node->by_kernel = n->by_kernel;
    node->dims = n->dims;
    node->buffer = n->buffer;
    node->args.assign(n->args.size(), nullptr);
    for (size_t i = 0; i < n->args.size(); ++i) {
      node->args[i] =
          node->buffer.data() + (static_cast<const char*>(n->args[i]) - n->buffer.data());
    }
    if (n->child != nullptr) {
      node->child = CloneGraphLocked(*n->child);
      node->child->owner = node.get();
    }
    copies.emplace(n.get(), node.get());
    g_nodes->insert(node.get());
    g->nodes.push_back(std::move(node));
  }
  return g;
}

void DestroyGraphLocked(Graph* g) {  // REQUIRES: g_mu held
  for (auto& n : g->nodes) {
    if (n->child != nullptr) DestroyGraphLocked(n->child);
    g_nodes->erase(n.get());
  }
  g_graphs->erase(g);
  delete g;
}

// Appends the executable copy of `g`'s nodes to `nodes`; `root_dep`, when set, is the index every
// node without dependencies waits for (the child-graph node `g` is embedded in).
void SnapshotInto(const Graph& g, std::optional<size_t> root_dep, std::vector<ExecNode>* nodes) {
  std::unordered_map<const Node*, size_t> index;
  for (const auto& n : g.nodes) {
    ExecNode e;
    e.origin = n.get();
    e.type = n->type;
    for (const Node* d : n->deps) e.deps.push_back(index.at(d));
    if (e.deps.empty() && root_dep.has_value()) e.deps.push_back(*root_dep);
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
      e.kernel = n->fn->kernel;
      e.dims = n->dims;
      e.buffer = std::make_shared<const std::vector<char>>(n->buffer);
    }
    const size_t at = nodes->size();
    index.emplace(n.get(), at);
    nodes->push_back(std::move(e));
    if (n->child != nullptr) {
      SnapshotInto(*n->child, at, nodes);
      (*nodes)[at].span = nodes->size() - at - 1;
    }
  }
}

// The executable copy of `g`'s nodes, child graphs flattened in place.
std::vector<ExecNode> Snapshot(const Graph& g) {
  std::vector<ExecNode> nodes;
  nodes.reserve(g.nodes.size());
  SnapshotInto(g, std::nullopt, &nodes);
  return nodes;
}

// Whether `fresh` has the topology of `current` (types and dependencies by position); sets
// `*result` and `*error_node` as cuGraphExecUpdate reports a mismatch.
bool SameTopology(const std::vector<ExecNode>& fresh, const std::vector<ExecNode>& current,
                  CUgraphExecUpdateResult* result, CUgraphNode* error_node) {
  if (fresh.size() != current.size()) {
    *result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return false;
  }
  for (size_t i = 0; i < fresh.size(); ++i) {
    const CUgraphNode at = reinterpret_cast<CUgraphNode>(const_cast<Node*>(fresh[i].origin));
    if (fresh[i].type != current[i].type) {
      *result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
      *error_node = at;
      return false;
    }
    // Dependencies by position, and the same nesting: a child graph spans the same nodes.
    if (fresh[i].deps != current[i].deps || fresh[i].span != current[i].span) {
      *result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
      *error_node = at;
      return false;
    }
  }
  return true;
}

constexpr unsigned long long kKnownInstantiateFlags =
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
    CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

CUresult Instantiate(CUgraphExec* out, CUgraph h, unsigned long long flags) {
  SIMGPU_REQUIRE_CTX();
  if (out == nullptr || (flags & ~kKnownInstantiateFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) {
    SIMGPU_GRAPH_UNSUPPORTED("device-launchable graphs");
  }
  std::lock_guard<std::mutex> lock(*g_mu);
  Graph* g = LiveGraph(h);
  if (g == nullptr || g->moved) return CUDA_ERROR_INVALID_VALUE;
  if (BeingCaptured(g)) return CUDA_ERROR_INVALID_VALUE;
  Exec* e = new Exec();
  e->nodes = Snapshot(*g);
  g_execs->insert(e);
  *out = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

CUresult GraphLaunch(CUgraphExec h, CUstream stream, bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  std::vector<ExecNode> nodes;
  MarkerPtr after;
  Exec* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(*g_mu);
    e = LiveExec(h);
    if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
    nodes = e->nodes;
    after = e->last;
  }
  // A graph launched into a capture would become a child-graph node: not simulated (and refused
  // by ResolveStream, which invalidates the capture).
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(stream, ptsz, &s)) return r;
  ChargeHost(config().calls.launch.Of(0));  // one launch, however many kernels
  // The kernel nodes in creation order (a topological order), serialized on the stream: each
  // waits for the one before, so every dependency is met. The first waits for this exec's
  // previous launch, wherever that ran.
  for (const ExecNode& n : nodes) {
    if (n.type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    std::vector<MarkerPtr> deps;
    if (after) deps.push_back(after);
    after = EnqueueKernel(s, n.kernel, n.dims, n.buffer, std::move(deps));
  }
  std::lock_guard<std::mutex> lock(*g_mu);
  if (LiveExec(h) == e && after) e->last = after;
  return CUDA_SUCCESS;
}

// Updates the exec node made from `node` to the kernel `spec` describes.
CUresult ExecSetKernel(CUgraphExec h, CUgraphNode node, const KernelSpec& spec) {
  SIMGPU_REQUIRE_CTX();
  std::lock_guard<std::mutex> lock(*g_mu);
  Exec* e = LiveExec(h);
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (ExecNode& n : e->nodes) {
    if (n.origin != reinterpret_cast<const Node*>(node)) continue;
    if (n.type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
    Node scratch;
    if (CUresult r = SetKernel(&scratch, spec)) return r;
    n.kernel = scratch.fn->kernel;
    n.dims = scratch.dims;
    n.buffer = std::make_shared<const std::vector<char>>(std::move(scratch.buffer));
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;  // not a node of the graph this exec came from
}

// cuGraphExecUpdate: the same topology (node count, types, dependencies by position) takes the
// new graph's kernel parameters; anything else fails as the driver's does.
CUresult ExecUpdate(CUgraphExec h, CUgraph graph, CUgraphExecUpdateResult* result,
                    CUgraphNode* error_node) {
  SIMGPU_REQUIRE_CTX();
  *result = CU_GRAPH_EXEC_UPDATE_ERROR;
  *error_node = nullptr;
  std::lock_guard<std::mutex> lock(*g_mu);
  Exec* e = LiveExec(h);
  Graph* g = LiveGraph(graph);
  if (e == nullptr || g == nullptr || g->moved) return CUDA_ERROR_INVALID_VALUE;
  std::vector<ExecNode> fresh = Snapshot(*g);
  if (!SameTopology(fresh, e->nodes, result, error_node)) {
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  for (size_t i = 0; i < fresh.size(); ++i) {
    fresh[i].origin = e->nodes[i].origin;  // the exec keeps answering to its own nodes' handles
  }
  e->nodes = std::move(fresh);
  *result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  return CUDA_SUCCESS;
}

// cuGraphExecChildGraphNodeSetParams: the exec's copy of child-graph node `node` takes the kernel
// parameters of `graph`, which must have the same topology as the graph the node embeds.
CUresult ExecSetChild(CUgraphExec h, CUgraphNode node, CUgraph graph) {
  SIMGPU_REQUIRE_CTX();
  std::lock_guard<std::mutex> lock(*g_mu);
  Exec* e = LiveExec(h);
  Graph* g = LiveGraph(graph);
  if (e == nullptr || g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t at = 0; at < e->nodes.size(); ++at) {
    if (e->nodes[at].origin != reinterpret_cast<const Node*>(node)) continue;
    if (e->nodes[at].type != CU_GRAPH_NODE_TYPE_GRAPH) return CUDA_ERROR_INVALID_VALUE;
    // Snapshotted after the exec's nodes up to this one, so its dependencies index the exec's.
    std::vector<ExecNode> fresh(e->nodes.begin(), e->nodes.begin() + at + 1);
    SnapshotInto(*g, at, &fresh);
    fresh.erase(fresh.begin(), fresh.begin() + at + 1);
    const size_t end = at + 1 + e->nodes[at].span;
    const std::vector<ExecNode> current(e->nodes.begin() + at + 1, e->nodes.begin() + end);
    CUgraphExecUpdateResult result;
    CUgraphNode error_node = nullptr;
    if (!SameTopology(fresh, current, &result, &error_node)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < fresh.size(); ++i) {
      fresh[i].origin = current[i].origin;  // the exec keeps answering to its own nodes' handles
      e->nodes[at + 1 + i] = std::move(fresh[i]);
    }
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;  // not a node of the graph this exec came from
}

CUresult KernelParamsOf(CUgraphNode h, Node** out) {
  SIMGPU_REQUIRE_CTX();
  Node* n = LiveNode(h);
  if (n == nullptr || n->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  *out = n;
  return CUDA_SUCCESS;
}

template <typename P>
void FillParams(const Node& n, P* p) {
  p->func = reinterpret_cast<CUfunction>(n.fn);
  p->gridDimX = n.dims.grid[0];
  p->gridDimY = n.dims.grid[1];
  p->gridDimZ = n.dims.grid[2];
  p->blockDimX = n.dims.block[0];
  p->blockDimY = n.dims.block[1];
  p->blockDimZ = n.dims.block[2];
  p->sharedMemBytes = n.dims.shared;
  p->kernelParams = const_cast<void**>(n.args.data());
  p->extra = nullptr;
}

// ---- stream capture ----

CUresult StreamOf(CUstream h, bool ptsz, Stream** s) {
  SIMGPU_REQUIRE_CTX();
  return ResolveStreamAnyState(h, ptsz, s);
}

CUresult BeginCapture(CUstream h, CUstreamCaptureMode mode, bool ptsz) {
  Stream* s = nullptr;
  if (CUresult r = StreamOf(h, ptsz, &s)) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (s->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::lock_guard<std::mutex> lock(*g_mu);
  int none = -1;
  if (!s->capture_mode.compare_exchange_strong(none, static_cast<int>(mode))) {
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  s->capture_invalidated.store(false, std::memory_order_relaxed);
  Graph* g = new Graph();
  g_graphs->insert(g);
  (*g_captures)[s] = Capture{g, nullptr, std::this_thread::get_id(), static_cast<int>(mode)};
  if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) g_strict_captures.fetch_add(1);
  return CUDA_SUCCESS;
}

CUresult EndCapture(CUstream h, CUgraph* graph, bool ptsz) {
  Stream* s = nullptr;
  if (CUresult r = StreamOf(h, ptsz, &s)) return r;
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_mu);
  const auto it = g_captures->find(s);
  if (it == g_captures->end()) return CUDA_ERROR_ILLEGAL_STATE;
  if (it->second.mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
      it->second.thread != std::this_thread::get_id()) {
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  }
  Graph* g = it->second.graph;
  if (it->second.mode != CU_STREAM_CAPTURE_MODE_RELAXED) g_strict_captures.fetch_sub(1);
  g_captures->erase(it);
  s->capture_mode.store(-1);
  *graph = nullptr;
  if (s->capture_invalidated.exchange(false)) {
    DestroyGraphLocked(g);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

}  // namespace

CUresult RefuseIfCaptureForbids() {
  if (g_strict_captures.load(std::memory_order_relaxed) == 0) return CUDA_SUCCESS;
  const int thread_mode = t_interaction_mode;
  if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  const std::thread::id self = std::this_thread::get_id();
  bool refused = false;
  std::lock_guard<std::mutex> lock(*g_mu);
  for (auto& [stream, capture] : *g_captures) {
    const bool own = capture.mode != CU_STREAM_CAPTURE_MODE_RELAXED && capture.thread == self;
    const bool global = capture.mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                        thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (own || global) {
      stream->capture_invalidated.store(true, std::memory_order_relaxed);  // as the driver does
      refused = true;
    }
  }
  return refused ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

void NoteCapturedMemoryNode(Stream* s) {
  std::lock_guard<std::mutex> lock(*g_mu);
  const auto it = g_captures->find(s);
  if (it != g_captures->end()) it->second.graph->memory_nodes = true;
}

CUresult CaptureKernel(Stream* s, Function* fn, const LaunchDims& dims, std::vector<char> buffer) {
  std::lock_guard<std::mutex> lock(*g_mu);
  const auto it = g_captures->find(s);
  if (it == g_captures->end()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Capture& c = it->second;
  auto node = std::make_unique<Node>();
  node->graph = c.graph;
  node->type = CU_GRAPH_NODE_TYPE_KERNEL;
  if (c.last != nullptr) node->deps.push_back(c.last);
  node->fn = fn;
  node->dims = dims;
  node->buffer = std::move(buffer);
  node->args.assign(fn->kernel->num_params, nullptr);
  for (unsigned i = 0; i < fn->kernel->num_params; ++i) {
    node->args[i] = node->buffer.data() + fn->kernel->params[i].offset;
  }
  c.last = node.get();
  g_nodes->insert(node.get());
  c.graph->nodes.push_back(std::move(node));
  return CUDA_SUCCESS;
}

}  // namespace simgpu

using namespace simgpu;  // NOLINT: entry points below

extern "C" {

// ---- stream capture ----

CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  return BeginCapture(stream, mode, false);
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  return BeginCapture(stream, mode, true);
}
// Capturing into an existing graph is not simulated.
CUresult cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph, const CUgraphNode* deps,
                                     const CUgraphEdgeData* edges, size_t count,
                                     CUstreamCaptureMode mode) {
  (void)stream, (void)graph, (void)deps, (void)edges, (void)count, (void)mode;
  SIMGPU_GRAPH_UNSUPPORTED("captures into an existing graph");
}
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph, const CUgraphNode* deps,
                                          const CUgraphEdgeData* edges, size_t count,
                                          CUstreamCaptureMode mode) {
  (void)stream, (void)graph, (void)deps, (void)edges, (void)count, (void)mode;
  SIMGPU_GRAPH_UNSUPPORTED("captures into an existing graph");
}
// The calling thread's interaction mode: set to *mode, the previous one handed back. Needs no
// context (the driver keeps it per thread).
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  SIMGPU_REQUIRE_INIT();
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int wanted = 0;  // read as an int: a job may pass any value
  std::memcpy(&wanted, mode, sizeof(wanted));
  if (wanted != CU_STREAM_CAPTURE_MODE_GLOBAL && wanted != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      wanted != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const int previous = t_interaction_mode;
  t_interaction_mode = wanted;
  *mode = static_cast<CUstreamCaptureMode>(previous);
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  return EndCapture(stream, graph, false);
}
CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  return EndCapture(stream, graph, true);
}

// ---- graphs and nodes ----

CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  SIMGPU_REQUIRE_CTX();
  if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Graph* g = new Graph();
  std::lock_guard<std::mutex> lock(*g_mu);
  g_graphs->insert(g);
  *phGraph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph) {
  SIMGPU_REQUIRE_CTX();
  std::lock_guard<std::mutex> lock(*g_mu);
  Graph* g = LiveGraph(hGraph);
  // An embedded graph goes with its node; a graph being captured, with the capture.
  if (g == nullptr || g->owner != nullptr || BeingCaptured(g)) return CUDA_ERROR_INVALID_VALUE;
  DestroyGraphLocked(g);
  return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                 const CUgraphNode* dependencies, size_t numDependencies,
                                 const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const KernelSpec spec = SpecWithKernel(*nodeParams);
  return AddNode(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_KERNEL,
                 &spec);
}
CUresult cuGraphAddKernelNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                              const CUgraphNode* dependencies, size_t numDependencies,
                              const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const KernelSpec spec = SpecOf(*nodeParams);
  return AddNode(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_KERNEL,
                 &spec);
}
CUresult cuGraphAddEmptyNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                             const CUgraphNode* dependencies, size_t numDependencies) {
  return AddNode(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_EMPTY,
                 nullptr);
}

// The node embeds a clone of `childGraph`.
CUresult cuGraphAddChildGraphNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                  const CUgraphNode* dependencies, size_t numDependencies,
                                  CUgraph childGraph) {
  return AddNode(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_GRAPH,
                 nullptr, childGraph);
}

// The generic form: kernel, empty and child-graph nodes; edge data must be the default (zero).
static CUresult AddGenericNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                               const CUgraphEdgeData* edges, size_t count,
                               CUgraphNodeParams* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; edges != nullptr && i < count; ++i) {
    const CUgraphEdgeData none{};
    if (std::memcmp(&edges[i], &none, sizeof(none)) != 0) {
      SIMGPU_GRAPH_UNSUPPORTED("programmatic or port edges");
    }
  }
  if (params->type == CU_GRAPH_NODE_TYPE_EMPTY) {
    return AddNode(out, graph, deps, count, CU_GRAPH_NODE_TYPE_EMPTY, nullptr);
  }
  if (params->type == CU_GRAPH_NODE_TYPE_GRAPH) {
    const CUgraphChildGraphNodeOwnership ownership = params->graph.ownership;
    if (ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE &&
        ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    return AddNode(out, graph, deps, count, CU_GRAPH_NODE_TYPE_GRAPH, nullptr, params->graph.graph,
                   ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE);
  }
  if (params->type != CU_GRAPH_NODE_TYPE_KERNEL) {
    SIMGPU_GRAPH_UNSUPPORTED("graph nodes other than kernel, empty and child graph nodes");
  }
  const KernelSpec spec = SpecWithKernel(params->kernel);
  return AddNode(out, graph, deps, count, CU_GRAPH_NODE_TYPE_KERNEL, &spec);
}
CUresult cuGraphAddNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                           const CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData,
                           size_t numDependencies, CUgraphNodeParams* nodeParams) {
  return AddGenericNode(phGraphNode, hGraph, dependencies, dependencyData, numDependencies,
                        nodeParams);
}
CUresult cuGraphAddNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                        size_t numDependencies, CUgraphNodeParams* nodeParams) {
  return AddGenericNode(phGraphNode, hGraph, dependencies, nullptr, numDependencies, nodeParams);
}

// Node types simgpu does not simulate: refused, never pretended.
CUresult cuGraphAddMemcpyNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                              const CUDA_MEMCPY3D*, CUcontext) {
  SIMGPU_GRAPH_UNSUPPORTED("memcpy nodes");
}
CUresult cuGraphAddMemsetNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                              const CUDA_MEMSET_NODE_PARAMS*, CUcontext) {
  SIMGPU_GRAPH_UNSUPPORTED("memset nodes");
}
CUresult cuGraphAddHostNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                            const CUDA_HOST_NODE_PARAMS*) {
  SIMGPU_GRAPH_UNSUPPORTED("host nodes");
}
CUresult cuGraphAddEventRecordNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUevent) {
  SIMGPU_GRAPH_UNSUPPORTED("event record nodes");
}
CUresult cuGraphAddEventWaitNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUevent) {
  SIMGPU_GRAPH_UNSUPPORTED("event wait nodes");
}
CUresult cuGraphAddMemAllocNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                CUDA_MEM_ALLOC_NODE_PARAMS*) {
  SIMGPU_GRAPH_UNSUPPORTED("memory allocation nodes");
}
CUresult cuGraphAddMemFreeNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUdeviceptr) {
  SIMGPU_GRAPH_UNSUPPORTED("memory free nodes");
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, size_t* numNodes) {
  SIMGPU_REQUIRE_CTX();
  if (numNodes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_mu);
  Graph* g = LiveGraph(hGraph);
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (nodes != nullptr) {
    for (size_t i = 0; i < *numNodes; ++i) {
      nodes[i] = i < g->nodes.size() ? reinterpret_cast<CUgraphNode>(g->nodes[i].get()) : nullptr;
    }
  }
  *numNodes = g->nodes.size();
  return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType* type) {
  SIMGPU_REQUIRE_CTX();
  if (type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_mu);
  Node* n = LiveNode(hNode);
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *type = n->type;
  return CUDA_SUCCESS;
}

// The graph a child-graph node embeds (not a copy: changes to it change the node).
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph* phGraph) {
  SIMGPU_REQUIRE_CTX();
  if (phGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_mu);
  Node* n = LiveNode(hNode);
  if (n == nullptr || n->type != CU_GRAPH_NODE_TYPE_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  *phGraph = reinterpret_cast<CUgraph>(n->child);
  return CUDA_SUCCESS;
}

// kernelParams point into the node's own copy of the values, valid until the node changes.
CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_mu);
  Node* n = nullptr;
  if (CUresult r = KernelParamsOf(hNode, &n)) return r;
  FillParams(*n, nodeParams);
  // A node made from a CUkernel names it as it was given (the v1 struct has only `func`).
  nodeParams->kern = n->by_kernel ? reinterpret_cast<CUkernel>(&n->fn->as_kernel) : nullptr;
  if (n->by_kernel) nodeParams->func = nullptr;
  nodeParams->ctx = nullptr;
  return CUDA_SUCCESS;
}
CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_mu);
  Node* n = nullptr;
  if (CUresult r = KernelParamsOf(hNode, &n)) return r;
  FillParams(*n, nodeParams);
  return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                       const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_mu);
  Node* n = nullptr;
  if (CUresult r = KernelParamsOf(hNode, &n)) return r;
  return SetKernel(n, SpecWithKernel(*nodeParams));
}
CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode,
                                    const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_mu);
  Node* n = nullptr;
  if (CUresult r = KernelParamsOf(hNode, &n)) return r;
  return SetKernel(n, SpecOf(*nodeParams));
}

// ---- executable graphs ----

CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                     unsigned long long flags) {
  return Instantiate(phGraphExec, hGraph, flags);
}
// The CUDA 10/11 forms (error node and log buffer).
CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                            char* logBuffer, size_t bufferSize) {
  if (phErrorNode != nullptr) *phErrorNode = nullptr;
  if (logBuffer != nullptr && bufferSize > 0) logBuffer[0] = '\0';
  return Instantiate(phGraphExec, hGraph, 0);
}
CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                               char* logBuffer, size_t bufferSize) {
  return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}
static CUresult InstantiateWithParams(CUgraphExec* out, CUgraph graph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  params->hErrNode_out = nullptr;
  const CUresult r = Instantiate(out, graph, params->flags);  // an upload is a no-op
  params->result_out =
      r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  return r;
}
CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  return InstantiateWithParams(phGraphExec, hGraph, instantiateParams);
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  return InstantiateWithParams(phGraphExec, hGraph, instantiateParams);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  SIMGPU_REQUIRE_CTX();
  Exec* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(*g_mu);
    e = LiveExec(hGraphExec);
    if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
    g_execs->erase(e);
  }
  delete e;  // queued launches hold their own parameter buffers
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  return GraphLaunch(hGraphExec, hStream, false);
}
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return GraphLaunch(hGraphExec, hStream, true);
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                           const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return ExecSetKernel(hGraphExec, hNode, SpecWithKernel(*nodeParams));
}
CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return ExecSetKernel(hGraphExec, hNode, SpecOf(*nodeParams));
}
CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                            CUgraph childGraph) {
  return ExecSetChild(hGraphExec, hNode, childGraph);
}
CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                  CUgraphNodeParams* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (nodeParams->type == CU_GRAPH_NODE_TYPE_GRAPH) {
    return ExecSetChild(hGraphExec, hNode, nodeParams->graph.graph);
  }
  if (nodeParams->type != CU_GRAPH_NODE_TYPE_KERNEL) {
    SIMGPU_GRAPH_UNSUPPORTED("graph nodes other than kernel and child graph nodes");
  }
  return ExecSetKernel(hGraphExec, hNode, SpecWithKernel(nodeParams->kernel));
}

CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                              CUgraphExecUpdateResultInfo* resultInfo) {
  if (resultInfo == nullptr) return CUDA_ERROR_INVALID_VALUE;
  resultInfo->errorFromNode = nullptr;
  return ExecUpdate(hGraphExec, hGraph, &resultInfo->result, &resultInfo->errorNode);
}
CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode* hErrorNode_out,
                           CUgraphExecUpdateResult* updateResult_out) {
  if (hErrorNode_out == nullptr || updateResult_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return ExecUpdate(hGraphExec, hGraph, updateResult_out, hErrorNode_out);
}

}  // extern "C"
