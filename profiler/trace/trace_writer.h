// TraceWriter: writes a spillway trace (docs/trace-format.md) from inside the preloaded
// libspillway.so. Thread-safe and cheap: each thread appends encoded records to its own buffer
// (no global lock in the common case); full buffers are written in order to an append-only file.
// Memory is bounded: when the file cannot keep up, records are dropped and counted, and the count
// is written in the trace's end record by Close(). Nothing here throws, uses iostreams or calls
// CUDA.
//
// How to write each record kind (all times from TraceClockNs(), threads from TraceThreadId()):
//   header       Open(path, header): written first, once.
//   string       id = InternString("kernel_name"); pass id as LaunchRecord::function_name. The
//                string record is written on first sight; later calls return the same id.
//   module       id = InternModule(build_id_hex, path): one per loaded ELF image (dedup'd).
//   call site    id = InternCallSite(frames): frames are (module id, offset), innermost first;
//                written on first sight; the id is stable across runs (trace_records.h).
//   alloc        Write(AllocRecord{...}) after the allocation succeeded; allocation_id is the
//                caller's (unique, non-zero), call_site from InternCallSite or 0.
//   free         Write(FreeRecord{...}) with the allocation_id of the AllocRecord it ends.
//   launch       Write(LaunchRecord{...}); accesses points to the caller's array (copied).
//   memcpy       Write(MemcpyRecord{...}); memset: Write(MemsetRecord{...}).
//   synchronize  Write(SynchronizeRecord{...}) after the call returned (with end_ns).
//   graph launch Write(GraphLaunchRecord{...}); module load: Write(ModuleLoadRecord{...}).
//   kernel time  Write(KernelTimeRecord{...}) whenever known (CUPTI buffer callbacks, events).
//   uvm counter  Write(UvmCounterRecord{...}); resident sample: Write(ResidentRecord{...}).
//   end          written by Close(); never by the caller.
// Definitions (string, module, call site) are written straight to the file before Intern*()
// returns, so in file order a definition always precedes the records that use it; they are never
// dropped. Other records of one thread keep their order; records of different threads are
// interleaved in buffer-sized pieces (order them by time).
#ifndef SPILLWAY_PROFILER_TRACE_TRACE_WRITER_H_
#define SPILLWAY_PROFILER_TRACE_TRACE_WRITER_H_

#include <time.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "profiler/trace/trace_records.h"

namespace spillway::trace {

// The trace clock: CLOCK_MONOTONIC in nanoseconds.
inline uint64_t TraceClockNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The calling thread's kernel thread id (gettid), cached per thread (and looked up again in a
// child after fork).
uint32_t TraceThreadId();

struct WriterOptions {
  enum class Flush {
    // A background thread writes full buffers (and every 100 ms what is pending). Default.
    kBackground,
    // The thread whose buffer fills writes it (and what else is pending) itself.
    kInline,
    // Only Flush() and Close() write; records beyond max_buffered_bytes are dropped. For tools
    // and tests.
    kManual,
  };
  Flush flush = Flush::kBackground;
  // The size of one buffer (each thread fills one at a time). A record larger than this is
  // dropped.
  size_t buffer_bytes = 64 * 1024;
  // All buffers together (filling and waiting to be written) never exceed this; when they would,
  // records are dropped and counted. At least 2 * buffer_bytes is used.
  size_t max_buffered_bytes = 32 * 1024 * 1024;
};

class TraceWriter {
 public:
  // Creates (truncates) `path` and writes the file preamble and the header record. Errors name
  // the path.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(const std::string& path,
                                                           const HeaderRecord& header,
                                                           const WriterOptions& options = {});
  // Closes the trace if Close() was not called (errors are ignored).
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends one record. Never fails: a record that cannot be buffered is dropped and counted.
  // After Close() or AbandonInChild() records are ignored (not counted).
  // REQUIRES: the writer outlives every concurrent call (inside libspillway.so: never destroy it,
  // Close() it at exit).
  void Write(const AllocRecord& record);
  void Write(const FreeRecord& record);
  void Write(const LaunchRecord& record);
  void Write(const MemcpyRecord& record);
  void Write(const MemsetRecord& record);
  void Write(const SynchronizeRecord& record);
  void Write(const GraphLaunchRecord& record);
  void Write(const ModuleLoadRecord& record);
  void Write(const KernelTimeRecord& record);
  void Write(const UvmCounterRecord& record);
  void Write(const ResidentRecord& record);

  // Interning (takes a lock; cache the ids on hot paths). Returns 0 after Close().
  StringId InternString(absl::string_view text);
  ModuleId InternModule(absl::string_view build_id_hex, absl::string_view path);
  // Frames beyond kMaxFrames are cut. An empty stack gives 0.
  CallSiteId InternCallSite(absl::Span<const Frame> frames);

  // Writes every buffered record to the file (the file may still lag a thread that is appending
  // at this moment).
  absl::Status Flush();
  // Flushes everything, writes the end record (with the dropped count) and closes the file.
  // Safe from an atexit handler or a static destructor; a second call returns OkStatus.
  absl::Status Close();
  // In the child after fork(): the writer stops writing and will never touch the file again
  // (the parent owns it); takes no locks. Call from a pthread_atfork child handler.
  void AbandonInChild();
  // Around fork(), from pthread_atfork's prepare and parent handlers: holds the lock under which
  // the background flusher allocates and frees, so that no allocator lock is held by it when the
  // child is made (an allocator without fork handlers, as ASan's in GCC 12, would otherwise leave
  // the child a lock nobody releases). The child abandons the writer with the lock held.
  void LockForFork();
  void UnlockAfterForkInParent();

  // Records dropped so far (the count the end record will carry).
  uint64_t records_dropped() const;
  const std::string& path() const { return path_; }

  class Impl;

 private:
  TraceWriter(std::string path, std::unique_ptr<Impl> impl);
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spillway::trace

#endif  // SPILLWAY_PROFILER_TRACE_TRACE_WRITER_H_
