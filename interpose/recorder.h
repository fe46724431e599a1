// Record mode (SPILLWAY_MODE=record): what the hooks see, written to a trace (SPILLWAY_TRACE,
// docs/trace-format.md) while the job runs as in run mode. The trace is opened on the first
// recorded event (the driver is initialized by then, so the header can name the device), closed
// at exit, and started anew under the child's pid in a forked child. Allocations carry call-site
// stacks (profiler/callsite/). Kernel times come from events recorded around each launch and read
// at synchronization points (and, for launches after the last one, at exit, waiting at most 1 s),
// unless CUPTI supplies them (SetKernelTimesFromCupti).
//
// Any failure to open or write the trace is said once and recording stops; the job goes on as in
// run mode. Outside record mode each hook pays one predictable branch: Recording().
#ifndef SPILLWAY_INTERPOSE_RECORDER_H_
#define SPILLWAY_INTERPOSE_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "interpose/config.h"
#include "policy/front_door.h"
#include "profiler/trace/trace_records.h"

namespace spillway::interpose {

// True while record mode writes a trace.
extern constinit std::atomic<bool> g_recording;
inline bool Recording() { return g_recording.load(std::memory_order_relaxed); }

// From the shim's configuration: in record mode, arms recording to `config.trace_path` ("%p" =
// pid). No file is created yet. Registers the fork handlers.
void StartRecording(const Config& config);

// Closes the trace (flush, end record). At exit; makes no CUDA call.
void CloseTraceAtExit();

// CUPTI hook: when CUPTI's activity API delivers kernel times (profiler/cupti/), the recorder
// stops recording events around launches. Call before the first launch.
void SetKernelTimesFromCupti(bool cupti);

// ---- events; REQUIRES (each): the driver is resolved and the caller holds a ReentrancyGuard ----

// An allocation the registry now holds (`allocation_id` is its registry id), with its call site.
void RecordAlloc(uint64_t address, uint64_t bytes, trace::AllocKind kind, uint64_t stream,
                 uint64_t allocation_id);
void RecordFree(uint64_t address, uint64_t allocation_id, uint64_t stream);

// Launches: BeginLaunch before the launch (prepares the kernel timing on `stream`) returns a
// correlation id for EndLaunch, which writes the launch record after it succeeded.
struct LaunchShape {
  void* function = nullptr;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_memory_bytes = 0;
  uint64_t stream = 0;
};
uint64_t BeginLaunch(uint64_t stream);
// Records the launch's start event: called after the engine's own waits and moves for the launch
// are issued, right before the real launch (a launch that never calls it gets no kernel time).
void StartKernelTiming();
// `words`: the pointer words of the launch's parameters; each access is written from the lowest
// word pointing into its allocation to the allocation's end (the whole allocation without one).
void EndLaunch(uint64_t correlation_id, bool launched, const LaunchShape& shape,
               const policy::AccessSet& accesses, const std::vector<uint64_t>& words);

void RecordMemcpy(trace::CopyDirection direction, bool async, uint64_t dst, uint64_t src,
                  uint64_t bytes, uint64_t stream);
void RecordMemset(bool async, uint64_t dst, uint64_t bytes, uint32_t value, uint32_t element_bytes,
                  uint64_t stream);
// A synchronization that began at `start_ns` (trace clock) and just returned; also collects the
// kernel times that are known now.
void RecordSynchronize(trace::SyncWhat what, uint64_t handle, uint64_t start_ns);
// A graph launch, as EndLaunch for a kernel (BeginLaunch before it, StartKernelTiming after the
// engine's moves): `accesses` what the graph's kernel nodes can touch (empty where unknown).
void EndGraphLaunch(uint64_t correlation_id, bool launched, uint64_t graph_exec, uint64_t stream,
                    const policy::AccessSet& accesses, const std::vector<uint64_t>& words);
// A CUDA module or library loaded from `name` (a file path), with its handle.
void RecordModuleLoad(uint64_t handle, const char* name);
// A module or library was unloaded: a function loaded later may get one of its functions'
// handles, so the names known by handle are forgotten.
void ForgetFunctionNames();

// The trace clock (CLOCK_MONOTONIC ns).
uint64_t RecordClockNs();

// The file the trace goes to for `pattern` in process `pid`: "%p" replaced by the pid; in a forked
// child a pattern without "%p" gets ".<pid>" appended so the parent's file is left alone.
std::string TracePathFor(const std::string& pattern, long pid, bool forked_child);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_RECORDER_H_
