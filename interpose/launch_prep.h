// Before a launch, a kernel's or a graph's: one path. Resolves the launch's pointers into its
// access set (through the front door, policy/front_door.h) and lets the current device's engine
// move data on the launch's stream. Where a stream capture is involved, this is where it is
// decided: a launch on a capturing stream is recorded into a graph, not run, so nothing moves;
// any other launch while a capture forbids this thread's calls gets no moves either (counted in
// engine.capture_skips) and relies on demand paging. Record mode resolves the access set in every
// case (the recorder reads it after the launch: record_hooks.h).
#ifndef SPILLWAY_INTERPOSE_LAUNCH_PREP_H_
#define SPILLWAY_INTERPOSE_LAUNCH_PREP_H_

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "policy/front_door.h"

namespace spillway::interpose {

struct LaunchRequest {
  CUstream stream = nullptr;
  bool per_thread = false;  // a null stream is the per-thread default stream
  uint64_t key = 0;         // the engine's launch key: the CUfunction, or the CUgraphExec
  // A kernel launch's function, whose parameter layout is looked up (ParamLayoutOf) only when the
  // launch is resolved: a launch that neither moves data nor is recorded asks the driver nothing.
  CUfunction function = nullptr;
  // Where the pointers come from: a kernel's parameters with their layout, its `extra` buffer, or
  // (a graph launch) the words of the graph's kernel nodes, read at instantiation.
  policy::LaunchPointers pointers;
  // A graph launch: `words`, when known (else there is no access set), are filled by this
  // function from the exec's table; kernel launches leave it null.
  bool (*graph_words)(uint64_t key, std::vector<uint64_t>* words) = nullptr;
};

// REQUIRES: the caller holds a ReentrancyGuard.
void PrepareLaunch(LaunchRequest request);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_LAUNCH_PREP_H_
