// Record mode (SPILLWAY_MODE=record): what the hooks see, written to a trace (SPILLWAY_TRACE,
// docs/trace-format.md) while the job runs as in run mode. The trace itself, its call-site stacks,
// kernel names and kernel times are profiler/record/trace_recorder.h's; this is its side in the
// shim: the driver without the hooks, the log, CUPTI, and when a capture lets kernel timing record
// or read events. Outside record mode each hook pays one predictable branch: Recording().
#ifndef SPILLWAY_INTERPOSE_RECORDER_H_
#define SPILLWAY_INTERPOSE_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "interpose/config.h"
#include "policy/front_door.h"
#include "profiler/record/trace_recorder.h"
#include "profiler/trace/trace_records.h"

namespace spillway::interpose {

// True while record mode writes a trace.
inline bool Recording() { return record::Recording(); }

// From the shim's configuration: in record mode, arms recording to `config.trace_path` ("%p" =
// pid). No file is created yet. Registers the fork handlers.
void StartRecording(const Config& config);

// Closes the trace (flush, end record). At exit; makes no CUDA call.
inline void CloseTraceAtExit() { record::CloseAtExit(); }

// ---- events; REQUIRES (each): the driver is resolved and the caller holds a ReentrancyGuard ----

// An allocation the registry now holds (`allocation_id` is its registry id), with its call site.
using record::RecordAlloc;
using record::RecordFree;

// Launches: BeginLaunch before the launch (prepares the kernel timing on `stream`) returns a
// correlation id for EndLaunch, which writes the launch record after it succeeded.
using record::LaunchShape;
uint64_t BeginLaunch(uint64_t stream);
// Records the launch's start event: called after the engine's own waits and moves for the launch
// are issued, right before the real launch (a launch that never calls it gets no kernel time).
void StartKernelTiming();
// `words`: the pointer words of the launch's parameters; each access is written from the lowest
// word pointing into its allocation to the allocation's end (the whole allocation without one).
void EndLaunch(uint64_t correlation_id, bool launched, const LaunchShape& shape,
               const policy::AccessSet& accesses, const std::vector<uint64_t>& words);

using record::RecordMemcpy;
using record::RecordMemset;
// A synchronization that began at `start_ns` (trace clock) and just returned; also collects the
// kernel times that are known now.
void RecordSynchronize(trace::SyncWhat what, uint64_t handle, uint64_t start_ns);
// A graph launch, as EndLaunch for a kernel (BeginLaunch before it, StartKernelTiming after the
// engine's moves): `accesses` what the graph's kernel nodes can touch (empty where unknown).
void EndGraphLaunch(uint64_t correlation_id, bool launched, uint64_t graph_exec, uint64_t stream,
                    const policy::AccessSet& accesses, const std::vector<uint64_t>& words);
// A CUDA module or library loaded from `name` (a file path), with its handle.
using record::RecordModuleLoad;
// A module or library was unloaded: a function loaded later may get one of its functions'
// handles, so the names known by handle are forgotten.
using record::ForgetFunctionNames;

// The trace clock (CLOCK_MONOTONIC ns).
inline uint64_t RecordClockNs() { return trace::TraceClockNs(); }

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_RECORDER_H_
