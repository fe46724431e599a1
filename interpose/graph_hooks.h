// Access sets for CUDA graph launches. When a graph is instantiated, its kernel nodes are read
// back through the real driver (cuGraphGetNodes, cuGraphNodeGetType, cuGraphKernelNodeGetParams)
// and each node's parameters are resolved like a launch's (policy/engine/access_set.h); the pointer
// words are kept per exec (graph_access.h). At cuGraphLaunch the words of all kernel nodes are
// resolved again against the live allocations and handed to the engine as one launch on the
// graph's stream (docs/engine.md, "Graphs"). SPILLWAY_GRAPH_ACCESS=0 turns this off.
#ifndef SPILLWAY_INTERPOSE_GRAPH_HOOKS_H_
#define SPILLWAY_INTERPOSE_GRAPH_HOOKS_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include "interpose/graph_access.h"

namespace spillway::interpose {

// The execs known so far.
GraphAccessTable& GraphAccess();

// After `graph` was instantiated into `exec` (or `exec` updated from it): reads its kernel nodes.
// A graph that cannot be read is said once and gets no access set.
void OnGraphInstantiated(CUgraphExec exec, CUgraph graph);
// After cuGraphExecUpdate: re-read from `graph` when it succeeded, else the exec is stale.
void OnGraphExecUpdated(CUgraphExec exec, CUgraph graph, bool succeeded);
// After a successful call that changed `exec`'s node parameters (named `how`): stale from now on
// (the new values cannot be read back from an exec), said once.
void OnGraphExecParamsChanged(CUgraphExec exec, const char* how);
void OnGraphExecDestroyed(CUgraphExec exec);

// Before cuGraphLaunch(exec, stream): the engine moves the data of its kernel nodes on `stream`.
// REQUIRES: the caller holds a ReentrancyGuard.
void PrepareGraphLaunch(CUgraphExec exec, CUstream stream, bool per_thread);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_GRAPH_HOOKS_H_
