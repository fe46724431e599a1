// The CUPTI recorder: device-side kernel, memcpy and memset times (CONCURRENT_KERNEL, MEMCPY,
// MEMSET), driver allocations (MEMORY2) and unified-memory counters (faults, migrations with
// their cause, thrashing, throttling, remote maps) from NVIDIA's CUPTI activity API, converted to
// trace records and handed to a sink. libcupti is loaded with dlopen at Start (cupti_library.h):
// when it is absent, cannot start, or another profiler already holds CUPTI, the recorder says so
// once through the caller's log function and everything goes on without it.
//
// How the record side uses it (docs/profile-cupti.md):
//   1. After the real cuInit succeeded: StartCuptiRecorder({.sink = &sink, .log = ...}) with a
//      CuptiTraceSink (cupti_trace_sink.h) on the trace writer; a non-OK status means "no
//      CUPTI": time kernels with events instead.
//   2. Around each real launch / memcpy / memset call, with the id it writes in the
//      LaunchRecord's (MemcpyRecord's, MemsetRecord's) correlation_id:
//        { CuptiCorrelationScope scope(correlation_id); real_cuLaunchKernel(...); }
//      The KernelTimeRecord the sink then receives for that launch carries the same id. (How: the
//      recorder subscribes to CUPTI's driver callbacks for those calls only; on entry it maps
//      CUPTI's correlation id of the call to the scope's id, and the activity records, which
//      carry CUPTI's id, are given the caller's id. Kernels of a graph launch share the
//      cuGraphLaunch call's id.)
//   3. At exit, before closing the trace: StopCuptiRecorder(absl::Seconds(2)).
#ifndef SPILLWAY_PROFILER_CUPTI_CUPTI_RECORDER_H_
#define SPILLWAY_PROFILER_CUPTI_CUPTI_RECORDER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "profiler/cupti/cupti_convert.h"
#include "profiler/trace/trace_records.h"

namespace spillway::cupti {

// What CUPTI says about a kernel besides its times (valid during the OnKernelTime call only).
struct KernelDetails {
  const char* name = nullptr;  // mangled name; may be null
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  uint32_t shared_memory_bytes = 0;  // static + dynamic
  uint32_t cupti_correlation_id = 0;
  uint32_t graph_id = 0;  // 0 = not part of a graph launch
};

// Receives converted records. Called from CUPTI's buffer-completion thread, one buffer at a time
// (never concurrently with itself), and never after StopCuptiRecorder() returned.
class CuptiSink {
 public:
  virtual ~CuptiSink() = default;
  // A kernel (activity kKernel), memcpy (kMemcpy) or memset (kMemset). `details` is set for
  // kernels only (null otherwise).
  virtual void OnKernelTime(const trace::KernelTimeRecord& record,
                            const KernelDetails* details) = 0;
  virtual void OnUvmCounter(const trace::UvmCounterRecord& record) = 0;
  // A driver allocation or release (MEMORY2). The record side already records allocations from
  // its hooks and may ignore these.
  virtual void OnMemory(const MemoryEvent& event) { (void)event; }
};

struct CuptiRecorderOptions {
  // REQUIRES: non-null, and outlives StopCuptiRecorder().
  CuptiSink* sink = nullptr;
  // Gets one line per problem, each at most once per process ("CUPTI not found ...", "CUPTI is
  // already in use by another profiler ...", "unified-memory counters unavailable ..."). May be
  // empty (then nothing is said).
  std::function<void(const std::string& line)> log;
  // The libcupti to load. Empty: $SPILLWAY_CUPTI if set ("off" disables CUPTI), else the search
  // in CuptiCandidates().
  std::string library;
  bool unified_memory_counters = true;
  bool memory_activity = true;  // MEMORY2
  // true: records carry the caller's ids (CuptiCorrelationScope; 0 when the call had none).
  // false: records carry CUPTI's own correlation ids (the injection library, which has no
  // launches of its own to match).
  bool caller_correlation_ids = true;
  size_t buffer_bytes = size_t{4} << 20;  // one CUPTI activity buffer
  // Slots of the CUPTI-id -> caller-id table (a power of two). Launches still unmatched after this
  // many later calls lose their id (counted in uncorrelated).
  size_t correlation_slots = size_t{1} << 16;
};

// Starts recording. OK: CUPTI is recording. Otherwise (also logged once through options.log):
//   kCancelled           SPILLWAY_CUPTI=off;
//   kNotFound            no libcupti found (the message lists what was tried);
//   kAlreadyExists       another CUPTI subscriber (Nsight Systems/Compute, torch.profiler, ...);
//   kFailedPrecondition  libcupti unusable (wrong version, missing functions) or CUPTI failed;
//   kInvalidArgument     no sink.
// Unified-memory counters that cannot be enabled are logged once and do not fail Start.
// Calling Start while recording returns OK and changes nothing. Thread-safe.
absl::Status StartCuptiRecorder(const CuptiRecorderOptions& options);

// Forces CUPTI to deliver every buffered record (cuptiActivityFlushAll with the forced flag),
// waiting at most `max_wait`, then stops recording: the sink is not called after this returns.
// kDeadlineExceeded when the flush did not finish in time (records still inside CUPTI are lost;
// logged once). OK when not recording. Safe from an atexit handler.
absl::Status StopCuptiRecorder(absl::Duration max_wait);

bool CuptiRecorderActive();

struct CuptiRecorderStats {
  uint64_t kernels = 0;
  uint64_t memcpys = 0;
  uint64_t memsets = 0;
  uint64_t uvm_counters = 0;
  uint64_t memory_events = 0;
  uint64_t uncorrelated = 0;     // kernels/copies/sets whose caller id was not known
  uint64_t cupti_dropped = 0;    // records CUPTI reported dropped (buffers too small or late)
  uint64_t buffers = 0;          // buffers delivered
  uint64_t uvm_unconverted = 0;  // UVM counters of kinds the trace does not hold
  bool uvm_enabled = false;      // unified-memory counters are being recorded
  bool clock_callback = false;   // CUPTI timestamps come from our clock (no offset needed)
};
CuptiRecorderStats GetCuptiRecorderStats();

// Marks the calling thread's driver calls, while it lives, as belonging to `correlation_id`
// (the caller's id for the launch, memcpy or memset it is about to make). Costs a thread-local
// store; nests (the inner scope wins). 0 means "none".
// For tests: forgets which "said once" lines were said, so each test sees its own.
void ResetCuptiRecorderMessagesForTesting();

class CuptiCorrelationScope {
 public:
  explicit CuptiCorrelationScope(uint64_t correlation_id);
  ~CuptiCorrelationScope();
  CuptiCorrelationScope(const CuptiCorrelationScope&) = delete;
  CuptiCorrelationScope& operator=(const CuptiCorrelationScope&) = delete;

 private:
  uint64_t previous_;
};

}  // namespace spillway::cupti

#endif  // SPILLWAY_PROFILER_CUPTI_CUPTI_RECORDER_H_
