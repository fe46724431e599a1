// The records of a spillway trace (docs/trace-format.md) as plain structs, shared by the writer
// (trace_writer.h, inside the preloaded libspillway.so) and the reader (trace_reader.h, in the
// tools). Strings and lists are views: a writer copies them into the trace before Write()
// returns; a reader's views stay valid until its next Next() call.
#ifndef SPILLWAY_PROFILER_TRACE_TRACE_RECORDS_H_
#define SPILLWAY_PROFILER_TRACE_TRACE_RECORDS_H_

#include <cstdint>
#include <variant>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spillway::trace {

// The file's format version. A reader reads every minor version of its major version: records of
// unknown kinds are skipped, and fields appended to a known record by a newer minor are ignored.
inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 2;  // 1.1: a graph launch's access set; 1.2: access modes

// The record kinds, as stored in each record's frame. Values are never reused.
enum class RecordKind : uint16_t {
  kHeader = 1,        // first record of every trace; exactly one
  kString = 2,        // an interned string (function names): id -> text
  kModule = 3,        // a loaded ELF image that call-site frames point into
  kCallSite = 4,      // a de-duplicated call-site stack
  kAlloc = 5,         // an allocation
  kFree = 6,          // a free
  kLaunch = 7,        // a kernel launch with its access set
  kMemcpy = 8,        // a memcpy (any direction, sync or async)
  kMemset = 9,        // a memset
  kSynchronize = 10,  // a context, stream or event synchronization
  kGraphLaunch = 11,  // a CUDA graph launch
  kModuleLoad = 12,   // cuModuleLoad* / cuLibraryLoad*: a CUDA module was loaded
  kKernelTime = 13,   // device-side start/end of a kernel, memcpy or memset (CUPTI or events)
  kUvmCounter = 14,   // a unified-memory counter (fault, migration, thrashing, throttling)
  kResident = 15,     // a sample of managed memory resident on the device
  kEnd = 16,          // last record of a closed trace (written by TraceWriter::Close)
};
const char* RecordKindName(RecordKind kind);  // "alloc", "launch", ...; "unknown" otherwise

// Ids. String, module and call-site ids are assigned by the writer's Intern*() calls; 0 means
// "none" for every id.
using StringId = uint32_t;
using ModuleId = uint32_t;
// A call site's id is a 64-bit hash of its frames' (build-id, offset) pairs, so the same call
// site has the same id in every run of the same binaries, whatever the load addresses.
using CallSiteId = uint64_t;

// Times are nanoseconds on CLOCK_MONOTONIC (TraceClockNs() in trace_writer.h); CUPTI timestamps
// must be converted to that clock before they are written. A time of 0 means "not recorded".

struct HeaderRecord {
  absl::string_view job;               // command line or program name
  absl::string_view device_name;       // e.g. "NVIDIA H100 80GB HBM3", "simgpu"
  absl::string_view cuda_version;      // CUDA version the driver supports, e.g. "12.4"; "" unknown
  absl::string_view driver_version;    // kernel driver release "550.54.15", "simgpu"; "" unknown
  absl::string_view spillway_version;  // e.g. "0.1.0"
  uint64_t device_memory_bytes = 0;    // 0 = unknown
  uint64_t start_ns = 0;               // CLOCK_MONOTONIC when recording started
  uint64_t start_unix_ns = 0;          // CLOCK_REALTIME at the same moment (for display)
  uint32_t pid = 0;
};

struct StringRecord {
  StringId id = 0;
  absl::string_view text;
};

struct ModuleRecord {
  ModuleId id = 0;
  absl::string_view build_id;  // lowercase hex of the GNU build-id; "" when the image has none
  absl::string_view path;      // where it was loaded from in the recorded run
};

struct Frame {
  ModuleId module = 0;  // a ModuleRecord's id
  uint64_t offset = 0;  // the return address minus the module's load base
  friend bool operator==(const Frame&, const Frame&) = default;
};

struct CallSiteRecord {
  CallSiteId id = 0;
  absl::Span<const Frame> frames;  // innermost first; at most kMaxFrames
};
inline constexpr size_t kMaxFrames = 64;

// The id the writer gives the call site of `frames` (before a collision moves it on): FNV-1a over
// each frame's module build-id (its length, then its bytes; `build_id(module)` names it, "" for
// none) and offset; never 0. The shim's run-time call sites (interpose/allocation_sites.h) use it
// too, so a policy rule by call site names the same stack in a trace and in a run.
CallSiteId HashCallSite(absl::Span<const Frame> frames,
                        absl::FunctionRef<absl::string_view(ModuleId)> build_id);

enum class AllocKind : uint8_t { kDevice = 0, kManaged = 1, kAsync = 2, kHost = 3, kOther = 4 };
const char* AllocKindName(AllocKind kind);  // "device", "managed", "async", "host", "other"

struct AllocRecord {
  uint64_t time_ns = 0;
  uint32_t thread = 0;  // gettid()
  AllocKind kind = AllocKind::kDevice;
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t stream = 0;         // for stream-ordered (async) allocations; 0 otherwise
  CallSiteId call_site = 0;    // 0 = stacks off or unwinding failed
  uint64_t allocation_id = 0;  // unique in the trace, never 0; FreeRecord refers to it
};

struct FreeRecord {
  uint64_t time_ns = 0;
  uint32_t thread = 0;
  uint64_t address = 0;
  uint64_t allocation_id = 0;  // 0 = not known to the recorder (the reader pairs by address)
  uint64_t stream = 0;         // cuMemFreeAsync's stream; 0 otherwise
};

// The part of one allocation a launch touches (the engine's resolver's access set).
struct AccessRecord {
  uint64_t allocation_id = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;  // 0 = the whole allocation
};

// How a launch uses an access's bytes (LaunchRecord::access_modes, one byte each).
enum AccessMode : uint8_t {
  kAccessUnknown = 0,
  kAccessRead = 1,
  kAccessWrite = 2,  // overwritten without being read: what it held before is dead
  kAccessReadWrite = 3,
};
inline constexpr uint8_t kMaxAccessMode = kAccessReadWrite;

struct LaunchRecord {
  uint64_t time_ns = 0;
  uint32_t thread = 0;
  uint64_t stream = 0;
  uint64_t function = 0;         // the CUfunction handle
  StringId function_name = 0;    // InternString(name); 0 = unknown
  uint32_t grid[3] = {1, 1, 1};  // x, y, z
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_memory_bytes = 0;
  uint64_t correlation_id = 0;  // matches KernelTimeRecord; 0 = none
  absl::Span<const AccessRecord> accesses;
  // Since 1.2, optional: one AccessMode per access, in the same order; empty = unknown (the
  // engine's own recordings cannot tell; a recorder of a framework's ops can).
  absl::Span<const uint8_t> access_modes = {};
};

enum class CopyDirection : uint8_t {
  kUnknown = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kHostToHost = 4,
  kDefault = 5,  // unified addressing decides (cuMemcpy, cudaMemcpyDefault)
  kPeer = 6,
};
const char* CopyDirectionName(CopyDirection direction);  // "HtoD", "DtoH", "DtoD", ...

struct MemcpyRecord {
  uint64_t time_ns = 0;
  uint32_t thread = 0;
  CopyDirection direction = CopyDirection::kUnknown;
  bool async = false;
  uint64_t dst = 0;
  uint64_t src = 0;
  uint64_t bytes = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;  // matches a KernelTimeRecord with activity kMemcpy; 0 = none
};

struct MemsetRecord {
  uint64_t time_ns = 0;
  uint32_t thread = 0;
  bool async = false;
  uint64_t dst = 0;
  uint64_t bytes = 0;
  uint32_t value = 0;
  uint32_t element_bytes = 1;  // 1, 2 or 4 (cuMemsetD8/16/32)
  uint64_t stream = 0;
  uint64_t correlation_id = 0;
};

enum class SyncWhat : uint8_t { kContext = 0, kStream = 1, kEvent = 2, kDevice = 3 };
const char* SyncWhatName(SyncWhat what);  // "context", "stream", "event", "device"

struct SynchronizeRecord {
  uint64_t time_ns = 0;  // when the call started
  uint64_t end_ns = 0;   // when it returned; 0 = not recorded
  uint32_t thread = 0;
  SyncWhat what = SyncWhat::kContext;
  uint64_t handle = 0;  // the stream or event; 0 for a context
};

struct GraphLaunchRecord {
  uint64_t time_ns = 0;
  uint32_t thread = 0;
  uint64_t graph_exec = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;
  // Since 1.1: what the graph's kernel nodes can touch, merged in node order (empty in a 1.0
  // trace, and where the graph's parameters could not be read: docs/engine.md, "Graphs").
  absl::Span<const AccessRecord> accesses;
};

struct ModuleLoadRecord {
  uint64_t time_ns = 0;
  uint32_t thread = 0;
  uint64_t module = 0;     // the CUmodule / CUlibrary handle
  absl::string_view name;  // file path, or "<image>" / "<fatbinary>" when loaded from memory
};

// What a KernelTimeRecord times.
enum class Activity : uint8_t { kKernel = 0, kMemcpy = 1, kMemset = 2 };

// Device-side execution of a launch (or copy), correlated to its LaunchRecord (MemcpyRecord,
// MemsetRecord) by correlation id. From CUPTI's CONCURRENT_KERNEL / MEMCPY / MEMSET activity, or
// from events on the recording side (simgpu's virtual clock).
struct KernelTimeRecord {
  uint64_t correlation_id = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t device = 0;
  uint64_t stream = 0;
  Activity activity = Activity::kKernel;
  enum Source : uint8_t { kCupti = 0, kEvents = 1 } source = kCupti;
};

enum class UvmKind : uint8_t {
  kGpuPageFault = 0,
  kCpuPageFault = 1,
  kMigrateToDevice = 2,  // bytes migrated host -> device
  kMigrateToHost = 3,    // bytes migrated device -> host
  kThrashing = 4,
  kThrottling = 5,
  kRemoteMap = 6,
};
const char* UvmKindName(UvmKind kind);

// A unified-memory counter (CUPTI UNIFIED_MEMORY_COUNTER activity).
struct UvmCounterRecord {
  UvmKind kind = UvmKind::kGpuPageFault;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;  // 0 = an instant
  uint64_t address = 0;
  uint64_t bytes = 0;  // bytes migrated (migrations); 0 otherwise
  uint64_t count = 1;  // number of faults / events this record stands for
  uint32_t cause = 0;  // CUPTI's CUpti_ActivityUnifiedMemoryMigrationCause (migrations) or
                       // access type (faults); 0 = unknown
  uint32_t device = 0;
};

// Managed memory resident on the device at a time (sampled by the recorder).
struct ResidentRecord {
  uint64_t time_ns = 0;
  uint64_t bytes = 0;
};

// Written by TraceWriter::Close(); a trace without it was not closed (truncated or crashed).
struct EndRecord {
  uint64_t end_ns = 0;
  uint64_t records_written = 0;  // records in the file before this one, header included
  uint64_t records_dropped = 0;  // records the writer dropped because it could not keep up
};

// Any record, as the reader returns it.
using Record =
    std::variant<HeaderRecord, StringRecord, ModuleRecord, CallSiteRecord, AllocRecord, FreeRecord,
                 LaunchRecord, MemcpyRecord, MemsetRecord, SynchronizeRecord, GraphLaunchRecord,
                 ModuleLoadRecord, KernelTimeRecord, UvmCounterRecord, ResidentRecord, EndRecord>;

// The kind of a record: the variant's alternatives are in RecordKind order, from kHeader.
inline RecordKind RecordKindOf(const Record& record) {
  return static_cast<RecordKind>(record.index() + 1);
}

}  // namespace spillway::trace

#endif  // SPILLWAY_PROFILER_TRACE_TRACE_RECORDS_H_
