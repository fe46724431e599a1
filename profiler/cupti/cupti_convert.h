// Pure conversions from CUPTI activity records (CUDA 13.0 layouts: Kernel10, Memcpy6, Memset4,
// Memory4, UnifiedMemoryCounter3) to spillway trace records (profiler/trace/trace_records.h).
// No CUPTI calls: everything here is tested on the CPU with hand-made records.
#ifndef SPILLWAY_PROFILER_CUPTI_CUPTI_CONVERT_H_
#define SPILLWAY_PROFILER_CUPTI_CUPTI_CONVERT_H_

#include <cupti.h>

#include <cstdint>
#include <optional>

#include "profiler/trace/trace_records.h"

namespace spillway::cupti {

// A CUPTI timestamp on the trace clock: `cupti_ns + offset_ns`; 0 (not recorded) stays 0.
uint64_t ToTraceClock(uint64_t cupti_ns, int64_t offset_ns);

// Device-side times of a kernel, memcpy or memset. `correlation_id` is the caller's id for the
// launch (LaunchRecord::correlation_id), or 0 when it is not known. `stream` is CUPTI's stream id
// (not the CUstream handle: join with the launch record for that).
trace::KernelTimeRecord KernelTime(const CUpti_ActivityKernel10& kernel, uint64_t correlation_id,
                                   int64_t offset_ns);
trace::KernelTimeRecord MemcpyTime(const CUpti_ActivityMemcpy6& memcpy, uint64_t correlation_id,
                                   int64_t offset_ns);
trace::KernelTimeRecord MemsetTime(const CUpti_ActivityMemset4& memset, uint64_t correlation_id,
                                   int64_t offset_ns);

// The trace's kind for a CUPTI unified-memory counter kind; nullopt for kinds the trace does not
// hold (device-to-device transfers, unknown kinds).
std::optional<trace::UvmKind> UvmKindOf(CUpti_ActivityUnifiedMemoryCounterKind kind);

// A unified-memory counter record, or nullopt when UvmKindOf() has no kind for it. Fields:
//   faults (GPU): count = fault groups for the page, cause = access type
//                 (CUpti_ActivityUnifiedMemoryAccessType), device = the faulting GPU.
//   faults (CPU): count = 1 (CUPTI's value is the faulting PC), instant (end 0).
//   migrations:   bytes = bytes moved, cause = CUpti_ActivityUnifiedMemoryMigrationCause,
//                 device = the GPU (destination for host-to-device, source for device-to-host).
//   thrashing:    bytes = region size, instant, device = lowest GPU of those fighting.
//   throttling:   interval, device = the throttled processor.
//   remote map:   bytes = region size, cause = CUpti_ActivityUnifiedMemoryRemoteMapCause,
//                 instant, device = the destination.
std::optional<trace::UvmCounterRecord> UvmCounter(const CUpti_ActivityUnifiedMemoryCounter3& record,
                                                  int64_t offset_ns);

// A short name for a UvmCounterRecord's cause ("user", "coherence", "prefetch", "eviction",
// "access_counters"; "read", "write", "atomic", "prefetch" for faults; "thrashing", "policy",
// "out_of_memory", ... for remote maps); "unknown" when there is none.
const char* UvmCauseName(trace::UvmKind kind, uint32_t cause);

// A driver allocation or release seen by CUPTI's MEMORY2 activity.
struct MemoryEvent {
  bool allocation = true;  // false: a release
  trace::AllocKind kind = trace::AllocKind::kOther;
  uint64_t time_ns = 0;  // trace clock
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint32_t device = 0;
  uint32_t stream = 0;          // CUPTI stream id for stream-ordered (pool) allocations
  uint32_t correlation_id = 0;  // CUPTI's correlation id of the driver call
};

// Nullopt for operations that are neither an allocation nor a release.
std::optional<MemoryEvent> MemoryEventOf(const CUpti_ActivityMemory4& record, int64_t offset_ns);

}  // namespace spillway::cupti

#endif  // SPILLWAY_PROFILER_CUPTI_CUPTI_CONVERT_H_
