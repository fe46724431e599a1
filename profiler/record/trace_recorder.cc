// The recorder behind record mode (trace_recorder.h): the trace writer (opened lazily, closed at
// exit, reopened under the child's pid after fork), call-site stacks for allocations, function
// names, and kernel times from events recorded around launches and read back at synchronization
// points. The driver is reached only through the RecordHost.
#include "profiler/record/trace_recorder.h"

#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "profiler/callsite/call_site_table.h"
#include "profiler/callsite/unwinder.h"

namespace spillway::record {

constinit std::atomic<bool> g_recording{false};

namespace {

// ---- the writer ----

enum OpenState : int { kNotOpen = 0, kOpen = 1, kFailed = 2 };
constinit RecordHost* g_host = nullptr;         // set once by Start, lives as long as the process
constinit std::string* g_pattern = nullptr;     // SPILLWAY_TRACE; set once, never freed
constinit std::string* g_trace_list = nullptr;  // SPILLWAY_TRACE_LIST; likewise (empty: none)
constinit std::string* g_version = nullptr;     // spillway's version for the header
using ExpandFn = std::string (*)(std::string_view, long);
constinit ExpandFn g_expand = nullptr;  // "%p" in the pattern -> the pid

// Appends `path` to the launcher's list of this job's traces, one line in one write (O_APPEND: the
// processes of a job append side by side).
void ListTrace(const std::string& path) {
  if (g_trace_list == nullptr || g_trace_list->empty()) return;
  const int fd = ::open(g_trace_list->c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;  // the launcher then lists no trace of this process; the trace is there
  const std::string line = path + "\n";
  const ssize_t written = ::write(fd, line.data(), line.size());
  (void)written;
  ::close(fd);
}
constinit std::atomic<int> g_open_state{kNotOpen};
constinit std::atomic<trace::TraceWriter*> g_writer{nullptr};  // never destroyed (closed at exit)
constinit std::atomic<bool> g_forked_child{false};
// A forked child's parent writer, kept reachable (never freed; an atomic so the store stays).
constinit std::atomic<trace::TraceWriter*> g_abandoned_writer{nullptr};
constinit std::atomic<bool> g_cupti_times{false};
constinit std::atomic<uint64_t> g_correlation{0};
std::mutex g_open_mutex;

std::string CommandLine() {
  std::string line;
  const int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return line;
  char buffer[1024];
  ssize_t n = 0;
  while (line.size() < 4096 && (n = ::read(fd, buffer, sizeof(buffer))) > 0) {
    line.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  while (!line.empty() && line.back() == '\0') line.pop_back();
  for (char& c : line) {
    if (c == '\0') c = ' ';
  }
  return line;
}

// The NVIDIA kernel module's release from /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX
// ... Kernel Module  580.65.06  ..."): the first token after "Module" that starts with a digit and
// has a dot. "" when the file is missing or says something else.
std::string KernelDriverRelease() {
  const int fd = ::open("/proc/driver/nvidia/version", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buffer[512];
  const ssize_t n = ::read(fd, buffer, sizeof(buffer) - 1);
  ::close(fd);
  if (n <= 0) return "";
  const std::string text(buffer, static_cast<size_t>(n));
  const std::string line = text.substr(0, text.find('\n'));
  size_t at = line.find("Module");
  if (at == std::string::npos) return "";
  while (at < line.size()) {
    const size_t begin = line.find_first_not_of(' ', at);
    if (begin == std::string::npos) break;
    const size_t end = std::min(line.find(' ', begin), line.size());
    const std::string token = line.substr(begin, end - begin);
    if (token[0] >= '0' && token[0] <= '9' && token.find('.') != std::string::npos) return token;
    at = end;
  }
  return "";
}

DeviceFacts AskDevice() {
  DeviceFacts facts = g_host->AskDevice();
  // simgpu has no kernel driver; elsewhere the kernel module's release, else the CUDA version.
  facts.driver_version = facts.name.rfind("simgpu", 0) == 0 ? "simgpu" : KernelDriverRelease();
  if (facts.driver_version.empty()) facts.driver_version = facts.cuda_version;
  return facts;
}

// The writer, opened on first use. Null when recording is off or the file cannot be written.
trace::TraceWriter* Writer() {
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  if (writer != nullptr || g_open_state.load(std::memory_order_acquire) != kNotOpen) {
    return writer;
  }
  std::lock_guard lock(g_open_mutex);
  if (g_open_state.load(std::memory_order_acquire) != kNotOpen) {
    return g_writer.load(std::memory_order_acquire);
  }
  const long pid = static_cast<long>(::getpid());
  const std::string path =
      TracePathFor(*g_pattern, g_expand(*g_pattern, pid), pid, g_forked_child.load());
  const DeviceFacts facts = AskDevice();
  const std::string job = CommandLine();
  trace::HeaderRecord header;  // views of the strings above
  header.job = job;
  header.device_name = facts.name;
  header.cuda_version = facts.cuda_version;
  header.driver_version = facts.driver_version;
  header.spillway_version = *g_version;
  header.device_memory_bytes = facts.memory;
  header.start_ns = trace::TraceClockNs();
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  header.start_unix_ns =
      static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
  header.pid = static_cast<uint32_t>(pid);
  std::string used = path;
  absl::StatusOr<std::unique_ptr<trace::TraceWriter>> opened =
      trace::TraceWriter::Open(used, header);
  if (absl::IsAlreadyExists(opened.status())) {
    // Another process of this or another job records to the same path (SPILLWAY_TRACE without
    // %p): this one records beside it, never into it.
    used = absl::StrCat(path, ".", pid);
    opened = trace::TraceWriter::Open(used, header);
    if (opened.ok()) {
      g_host->Problem(absl::StrFormat(
          "SPILLWAY_TRACE: another process is recording to '%s'; this one (pid %d) records to "
          "'%s' (put %%p in the path for a trace per process)",
          path, pid, used));
    }
  }
  if (!opened.ok()) {
    g_open_state.store(kFailed, std::memory_order_release);
    g_recording.store(false, std::memory_order_relaxed);
    g_host->Problem(absl::StrFormat(
        "SPILLWAY_TRACE: cannot record to '%s' (%s); the job goes on as in run mode without a "
        "trace",
        path, opened.status().message()));
    return nullptr;
  }
  writer = opened->release();
  g_writer.store(writer, std::memory_order_release);
  g_open_state.store(kOpen, std::memory_order_release);
  g_host->Info("recording to " + used);
  ListTrace(used);
  g_host->Opened(writer, facts.name, g_forked_child.load());
  return writer;
}

// ---- call sites ----

class WriterSink final : public callsite::CallSiteSink {
 public:
  explicit WriterSink(trace::TraceWriter* writer) : writer_(writer) {}
  uint32_t OnModule(const callsite::ModuleInfo& info) override {
    const trace::ModuleId id = writer_->InternModule(info.build_id, info.path);
    return id != 0 ? id : 0xffffffffu;  // a closed writer: the frames are never written
  }
  uint64_t OnCallSite(uint64_t, std::span<const callsite::Frame> frames) override {
    trace::Frame converted[trace::kMaxFrames];
    const size_t count = std::min(frames.size(), trace::kMaxFrames);
    for (size_t i = 0; i < count; ++i) converted[i] = {frames[i].module, frames[i].offset};
    return writer_->InternCallSite(absl::MakeConstSpan(converted, count));
  }

 private:
  trace::TraceWriter* writer_;
};

callsite::CallSiteTable& CallSites() {
  static callsite::CallSiteTable* table = new callsite::CallSiteTable;  // never freed
  return *table;
}

void SayNoStacks(const char* line) { g_host->Problem(line); }

// Leading frames inside the object holding RecordAlloc (the preloaded library, recorder and hooks
// alike) are dropped: the first frame kept is the job's call into the driver API.
uint64_t CallSiteOf(trace::TraceWriter* writer) {
  if (!callsite::UnwinderAvailable(SayNoStacks)) return 0;
  WriterSink sink(writer);
  return CallSites().Capture(reinterpret_cast<const void*>(&RecordAlloc), &sink);
}

// ---- function names ----

std::mutex g_names_mutex;
// Guarded by g_names_mutex; cleared in a forked child (string ids belong to one writer).
absl::flat_hash_map<void*, trace::StringId>* g_names = nullptr;
constinit std::atomic<uint64_t> g_names_generation{1};

trace::StringId FunctionName(trace::TraceWriter* writer, void* function) {
  struct Last {
    void* function = nullptr;
    trace::StringId id = 0;
    uint64_t generation = 0;
  };
  thread_local Last last;
  const bool cacheable = g_host->NamesCacheable();
  const uint64_t generation = g_names_generation.load(std::memory_order_relaxed);
  if (cacheable && last.function == function && last.generation == generation) return last.id;
  trace::StringId id = 0;
  {
    std::lock_guard lock(g_names_mutex);
    if (g_names == nullptr) g_names = new absl::flat_hash_map<void*, trace::StringId>;
    if (const auto found = g_names->find(function); cacheable && found != g_names->end()) {
      id = found->second;
    } else {
      if (const char* name = g_host->FunctionName(function); name != nullptr) {
        id = writer->InternString(name);
      }
      if (cacheable) g_names->emplace(function, id);
    }
  }
  if (cacheable) last = Last{function, id, generation};
  return id;
}

// ---- kernel times from events ----

struct PendingTime {
  uint64_t correlation = 0;
  void* start = nullptr;
  void* end = nullptr;
  uint64_t stream = 0;
};

constexpr size_t kMaxPending = 16384;  // beyond this, launches go untimed until the next sync
std::mutex g_time_mutex;
struct TimeState {
  void* base = nullptr;  // recorded on the legacy stream when timing started
  uint64_t base_ns = 0;  // the trace clock at that moment
  bool failed = false;   // events unusable: no timing
  std::vector<void*> free_events;
  std::vector<PendingTime> pending;
};
TimeState* g_times = nullptr;  // guarded by g_time_mutex; never freed
// This thread's launch in progress: its start event, taken by BeginTiming and recorded by
// StartTiming once the engine's own waits and moves for the launch are issued.
thread_local void* t_launch_start = nullptr;
thread_local uint64_t t_launch_stream = 0;
thread_local bool t_start_recorded = false;

void* TakeEvent(TimeState& times) {
  if (!times.free_events.empty()) {
    void* event = times.free_events.back();
    times.free_events.pop_back();
    return event;
  }
  return g_host->CreateEvent();
}

// Writes the times of finished launches; leaves the rest pending. REQUIRES: g_time_mutex held.
void CollectTimesLocked(TimeState& times, trace::TraceWriter* writer) {
  size_t kept = 0;
  for (PendingTime& pending : times.pending) {
    if (g_host->EventPending(pending.end)) {
      times.pending[kept++] = pending;
      continue;
    }
    float start_ms = 0;
    float end_ms = 0;
    if (g_host->ElapsedMs(&start_ms, times.base, pending.start) &&
        g_host->ElapsedMs(&end_ms, times.base, pending.end)) {
      trace::KernelTimeRecord record;
      record.correlation_id = pending.correlation;
      record.start_ns = times.base_ns + static_cast<uint64_t>(static_cast<double>(start_ms) * 1e6);
      record.end_ns = times.base_ns + static_cast<uint64_t>(static_cast<double>(end_ms) * 1e6);
      record.device = static_cast<uint32_t>(std::max(0, g_host->CurrentDevice()));
      record.stream = pending.stream;
      record.activity = trace::Activity::kKernel;
      record.source = trace::KernelTimeRecord::kEvents;
      writer->Write(record);
    }
    times.free_events.push_back(pending.start);
    times.free_events.push_back(pending.end);
  }
  times.pending.resize(kept);
}

constexpr uint64_t kExitWaitNs = 1000000000;  // how long exit waits for unfinished launches

// ---- fork ----

void BeforeFork() {
  g_open_mutex.lock();
  g_names_mutex.lock();
  g_time_mutex.lock();
  CallSites().LockForFork();
  // The writer cannot change while g_open_mutex is held.
  if (trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire)) writer->LockForFork();
}

void AfterForkInParent() {
  if (trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire)) {
    writer->UnlockAfterForkInParent();
  }
  CallSites().UnlockInParent();
  g_time_mutex.unlock();
  g_names_mutex.unlock();
  g_open_mutex.unlock();
}

void AfterForkInChild() {
  CallSites().ResetInChild();
  if (trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire)) {
    writer->AbandonInChild();  // the parent's file; the object is left alone (never freed)
    g_abandoned_writer.store(writer, std::memory_order_relaxed);
  }
  g_writer.store(nullptr, std::memory_order_release);
  g_forked_child.store(true, std::memory_order_relaxed);
  // The child records to its own file, opened when it records something (a helper that never
  // calls CUDA leaves no file).
  const bool record = g_pattern != nullptr && g_open_state.load() != kFailed;
  g_open_state.store(kNotOpen, std::memory_order_release);
  g_recording.store(record, std::memory_order_relaxed);
  if (g_names != nullptr) g_names->clear();
  g_names_generation.fetch_add(1, std::memory_order_relaxed);
  if (g_times != nullptr) *g_times = TimeState{};  // the parent's events mean nothing here
  g_time_mutex.unlock();
  g_names_mutex.unlock();
  g_open_mutex.unlock();
}

}  // namespace

std::string TracePathFor(const std::string& pattern, const std::string& expanded, long pid,
                         bool forked_child) {
  if (forked_child && expanded == pattern) return expanded + "." + std::to_string(pid);
  return expanded;
}

void Start(RecordHost* host, const std::string& pattern, const std::string& trace_list,
           std::string (*expand)(std::string_view pattern, long pid),
           const std::string& spillway_version) {
  g_host = host;
  g_pattern = new std::string(pattern);
  g_trace_list = new std::string(trace_list);
  g_version = new std::string(spillway_version);
  g_expand = expand;
  // libunwind is loaded now, while the library initializes, rather than from the first
  // allocation's hook, where dlopen would take the loader lock from inside a CUDA call.
  callsite::UnwinderAvailable(SayNoStacks);
  pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild);
  g_recording.store(true, std::memory_order_relaxed);
}

void CloseAtExit() {
  g_recording.store(false, std::memory_order_relaxed);
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  if (writer == nullptr) return;
  g_host->BeforeClose();
  const absl::Status status = writer->Close();
  if (!status.ok()) g_host->Error("SPILLWAY_TRACE: " + std::string(status.message()));
}

void SetKernelTimesFromCupti(bool cupti) { g_cupti_times.store(cupti, std::memory_order_relaxed); }

void RecordAlloc(uint64_t address, uint64_t bytes, trace::AllocKind kind, uint64_t stream,
                 uint64_t allocation_id) {
  trace::TraceWriter* writer = Writer();
  if (writer == nullptr) return;
  trace::AllocRecord record;
  record.time_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.kind = kind;
  record.address = address;
  record.bytes = bytes;
  record.stream = stream;
  record.call_site = CallSiteOf(writer);
  record.allocation_id = allocation_id;
  writer->Write(record);
}

void RecordFree(uint64_t address, uint64_t allocation_id, uint64_t stream) {
  trace::TraceWriter* writer = Writer();
  if (writer == nullptr) return;
  trace::FreeRecord record;
  record.time_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.address = address;
  record.allocation_id = allocation_id;
  record.stream = stream;
  writer->Write(record);
}

uint64_t NextCorrelation() {
  t_launch_start = nullptr;
  return g_correlation.fetch_add(1, std::memory_order_relaxed) + 1;
}

bool TimesFromEvents() {
  return !g_cupti_times.load(std::memory_order_relaxed) && Writer() != nullptr;
}

void BeginTiming(uint64_t stream, bool base_allowed) {
  std::lock_guard lock(g_time_mutex);
  if (g_times == nullptr) g_times = new TimeState;
  TimeState& times = *g_times;
  if (times.failed) return;
  if (times.base == nullptr) {
    if (!base_allowed) return;
    times.base = TakeEvent(times);
    if (times.base == nullptr || !g_host->RecordEvent(times.base, 0)) {
      times.failed = true;
      g_host->Problem("record mode: cannot record CUDA events; no kernel times");
      return;
    }
    times.base_ns = trace::TraceClockNs();
  }
  if (times.pending.size() >= kMaxPending) {
    if (trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire)) {
      CollectTimesLocked(times, writer);
    }
    if (times.pending.size() >= kMaxPending) return;  // untimed until the next sync
  }
  // Recorded by StartTiming, right before the kernel: an event recorded now would also time the
  // waits the engine puts on the stream for its prefetches (not the kernel's time).
  t_launch_start = TakeEvent(times);
  t_launch_stream = stream;
  t_start_recorded = false;
}

bool AwaitsStart() { return t_launch_start != nullptr && !t_start_recorded; }
bool TimingBegun() { return t_launch_start != nullptr; }

void StartTiming(bool allowed) {
  if (t_launch_start == nullptr || t_start_recorded) return;
  t_start_recorded = allowed && g_host->RecordEvent(t_launch_start, t_launch_stream);
}

void EndTiming(uint64_t correlation_id, bool end_allowed, uint64_t stream) {
  void* start = t_launch_start;
  const bool started = t_start_recorded;
  t_launch_start = nullptr;
  t_start_recorded = false;
  if (start == nullptr) return;
  std::lock_guard lock(g_time_mutex);
  TimeState& times = *g_times;
  void* end = end_allowed && started ? TakeEvent(times) : nullptr;
  if (end != nullptr && g_host->RecordEvent(end, stream)) {
    times.pending.push_back(PendingTime{correlation_id, start, end, stream});
  } else {
    times.free_events.push_back(start);
    if (end != nullptr) times.free_events.push_back(end);
  }
}

void CollectTimes() {
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  if (writer == nullptr) return;
  std::lock_guard lock(g_time_mutex);
  if (g_times != nullptr && !g_times->pending.empty()) CollectTimesLocked(*g_times, writer);
}

// Launches after the job's last synchronization: waits at most kExitWaitNs for them; what is still
// running then stays untimed (said once). Never blocks on a stuck thread's lock.
void CollectTimesAtExit() {
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  if (writer == nullptr || g_cupti_times.load(std::memory_order_relaxed)) return;
  const uint64_t deadline = trace::TraceClockNs() + kExitWaitNs;
  size_t left = 0;
  for (;;) {
    {
      std::unique_lock lock(g_time_mutex, std::try_to_lock);
      if (lock.owns_lock()) {
        if (g_times == nullptr || g_times->pending.empty()) return;
        CollectTimesLocked(*g_times, writer);
        left = g_times->pending.size();
        if (left == 0) return;
      }
    }
    if (trace::TraceClockNs() >= deadline) break;
    const timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
  }
  if (left > 0) {
    g_host->Info(absl::StrFormat(
        "record mode: %d launch(es) still running at exit have no kernel time", left));
  }
}

void EndLaunch(uint64_t correlation_id, const LaunchShape& shape,
               absl::Span<const trace::AccessRecord> accesses) {
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  if (writer == nullptr) return;
  trace::LaunchRecord record;
  record.time_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.stream = shape.stream;
  record.function = reinterpret_cast<uint64_t>(shape.function);
  record.function_name = FunctionName(writer, shape.function);
  for (int i = 0; i < 3; ++i) {
    record.grid[i] = shape.grid[i];
    record.block[i] = shape.block[i];
  }
  record.shared_memory_bytes = shape.shared_memory_bytes;
  record.correlation_id = correlation_id;
  record.accesses = accesses;
  writer->Write(record);
}

void EndGraphLaunch(uint64_t correlation_id, uint64_t graph_exec, uint64_t stream,
                    absl::Span<const trace::AccessRecord> accesses) {
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  if (writer == nullptr) return;
  trace::GraphLaunchRecord record;
  record.time_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.graph_exec = graph_exec;
  record.stream = stream;
  record.correlation_id = correlation_id;
  record.accesses = accesses;
  writer->Write(record);
}

void RecordMemcpy(trace::CopyDirection direction, bool async, uint64_t dst, uint64_t src,
                  uint64_t bytes, uint64_t stream) {
  trace::TraceWriter* writer = Writer();
  if (writer == nullptr) return;
  trace::MemcpyRecord record;
  record.time_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.direction = direction;
  record.async = async;
  record.dst = dst;
  record.src = src;
  record.bytes = bytes;
  record.stream = stream;
  writer->Write(record);
}

void RecordMemset(bool async, uint64_t dst, uint64_t bytes, uint32_t value, uint32_t element_bytes,
                  uint64_t stream) {
  trace::TraceWriter* writer = Writer();
  if (writer == nullptr) return;
  trace::MemsetRecord record;
  record.time_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.async = async;
  record.dst = dst;
  record.bytes = bytes;
  record.value = value;
  record.element_bytes = element_bytes;
  record.stream = stream;
  writer->Write(record);
}

bool RecordSynchronize(trace::SyncWhat what, uint64_t handle, uint64_t start_ns) {
  trace::TraceWriter* writer = Writer();
  if (writer == nullptr) return false;
  trace::SynchronizeRecord record;
  record.time_ns = start_ns;
  record.end_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.what = what;
  record.handle = handle;
  writer->Write(record);
  return true;
}

void ForgetFunctionNames() {
  std::lock_guard lock(g_names_mutex);
  if (g_names != nullptr) g_names->clear();
  g_names_generation.fetch_add(1, std::memory_order_relaxed);
}

void RecordModuleLoad(uint64_t handle, const char* name) {
  trace::TraceWriter* writer = Writer();
  if (writer == nullptr) return;
  trace::ModuleLoadRecord record;
  record.time_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.module = handle;
  record.name = name != nullptr ? name : "<image>";
  writer->Write(record);
}

}  // namespace spillway::record
