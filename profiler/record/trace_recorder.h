// The trace a process records in record mode (docs/trace-format.md): the writer, opened on the
// first event and closed at exit, with call-site stacks (profiler/callsite/), kernel names, kernel
// times from events, and what a fork does to them. It knows traces, not the CUDA hooks: what it
// needs from the process it records in (the driver's answers without the hooks, the log, what to
// do once the trace is open) comes through a RecordHost, which interpose/recorder.cc implements
// and which decides, with its capture state, when events may be recorded or read.
//
// Any failure to open or write the trace is said once (RecordHost::Problem) and recording stops;
// the job goes on. The functions below are safe from any thread.
#ifndef SPILLWAY_PROFILER_RECORD_TRACE_RECORDER_H_
#define SPILLWAY_PROFILER_RECORD_TRACE_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/types/span.h"
#include "profiler/trace/trace_records.h"
#include "profiler/trace/trace_writer.h"

namespace spillway::record {

// The trace header's device fields (best effort: "" / 0 where the driver cannot tell).
struct DeviceFacts {
  std::string name;
  std::string cuda_version;    // the CUDA version the driver supports, "13.0"
  std::string driver_version;  // the NVIDIA kernel driver's release, "580.65.06"
  uint64_t memory = 0;
};

// What the recorder asks of the process it records in. Events are the driver's CUevent handles,
// opaque here. Called with the recorder's own locks held: an implementation calls the driver
// without the hooks and never calls back into the recorder.
class RecordHost {
 public:
  virtual ~RecordHost() = default;
  virtual DeviceFacts AskDevice() = 0;
  virtual int CurrentDevice() = 0;
  // The kernel's name for a launched function handle, or null where the driver cannot tell.
  virtual const char* FunctionName(void* function) = 0;
  // False while a module unload is under way: a handle may then be a new function that took an
  // unloaded one's, so nothing is cached by handle.
  virtual bool NamesCacheable() = 0;
  virtual void* CreateEvent() = 0;  // null when it cannot
  // False, nothing recorded, where the event cannot be recorded on `stream` now.
  virtual bool RecordEvent(void* event, uint64_t stream) = 0;
  virtual bool EventPending(void* event) = 0;  // true while the work before it has not finished
  virtual bool ElapsedMs(float* ms, void* from, void* to) = 0;
  // Said once each: a warning kept for the summary, an information line, an error line.
  virtual void Problem(const std::string& line) = 0;
  virtual void Info(const std::string& line) = 0;
  virtual void Error(const std::string& line) = 0;
  // The trace was opened, for the device named `device_name`, in a forked child or not.
  virtual void Opened(trace::TraceWriter* writer, const std::string& device_name,
                      bool forked_child) = 0;
  virtual void BeforeClose() = 0;  // the trace is about to close (at exit)
};

// True while the trace is (or may still be) written.
extern constinit std::atomic<bool> g_recording;
inline bool Recording() { return g_recording.load(std::memory_order_relaxed); }

// Arms recording to `pattern` ("%p" = pid, expanded by `expand`), listing each trace written on a
// line of `trace_list` (none when empty). No file is created yet. Registers the fork handlers.
// `host` lives as long as the process.
void Start(RecordHost* host, const std::string& pattern, const std::string& trace_list,
           std::string (*expand)(std::string_view pattern, long pid),
           const std::string& spillway_version);

// Closes the trace (flush, end record). At exit; makes no driver call.
void CloseAtExit();

// Kernel times come from CUPTI rather than events (CUPTI started when the trace opened).
void SetKernelTimesFromCupti(bool cupti);

// ---- events; each opens the trace on first use ----

void RecordAlloc(uint64_t address, uint64_t bytes, trace::AllocKind kind, uint64_t stream,
                 uint64_t allocation_id);
void RecordFree(uint64_t address, uint64_t allocation_id, uint64_t stream);
void RecordMemcpy(trace::CopyDirection direction, bool async, uint64_t dst, uint64_t src,
                  uint64_t bytes, uint64_t stream);
void RecordMemset(bool async, uint64_t dst, uint64_t bytes, uint32_t value, uint32_t element_bytes,
                  uint64_t stream);
void RecordModuleLoad(uint64_t handle, const char* name);
// A synchronization that began at `start_ns` (trace clock) and just returned; false when no trace
// is written.
bool RecordSynchronize(trace::SyncWhat what, uint64_t handle, uint64_t start_ns);
// A module was unloaded: a function loaded later may get one of its functions' handles.
void ForgetFunctionNames();

// ---- launches and their kernel times ----

struct LaunchShape {
  void* function = nullptr;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_memory_bytes = 0;
  uint64_t stream = 0;
};

// A launch's correlation id (for EndLaunch and CUPTI's records); forgets this thread's timing.
uint64_t NextCorrelation();
// True when the trace is open and kernel times come from events: the caller may then begin timing.
bool TimesFromEvents();
// Takes a start event for this thread's launch on `stream`, recorded later by StartTiming. On the
// first timed launch a base event goes on the legacy stream, if `base_allowed`; without one
// nothing is timed.
void BeginTiming(uint64_t stream, bool base_allowed);
// True when this thread's launch has a start event that StartTiming has not recorded yet.
bool AwaitsStart();
// Records this thread's start event right before the kernel (`allowed`: the host admits it now).
void StartTiming(bool allowed);
// True when BeginTiming took a start event for this thread's launch (EndTiming then has work).
bool TimingBegun();
// Ends the timing BeginTiming began: with `end_allowed`, an end event after the kernel makes its
// time pending, read by CollectTimes; otherwise the events go back.
void EndTiming(uint64_t correlation_id, bool end_allowed, uint64_t stream);
// Writes the times of finished launches.
void CollectTimes();
// At exit: reads the pending times, waiting at most 1 s for unfinished launches; said once when
// some are left untimed. Never blocks on a lock another thread holds.
void CollectTimesAtExit();

// The launch record after a successful launch: `accesses` what it can touch.
void EndLaunch(uint64_t correlation_id, const LaunchShape& shape,
               absl::Span<const trace::AccessRecord> accesses);
void EndGraphLaunch(uint64_t correlation_id, uint64_t graph_exec, uint64_t stream,
                    absl::Span<const trace::AccessRecord> accesses);

// The file the trace goes to for `path` (already expanded) in process `pid`: in a forked child a
// path that `pattern` left unchanged gets ".<pid>" appended, so the parent's file is left alone.
std::string TracePathFor(const std::string& pattern, const std::string& expanded, long pid,
                         bool forked_child);

}  // namespace spillway::record

#endif  // SPILLWAY_PROFILER_RECORD_TRACE_RECORDER_H_
