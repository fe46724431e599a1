// The recorder behind record mode: the trace writer (opened lazily, closed at exit, reopened under
// the child's pid after fork), call-site stacks for allocations, function names, and kernel times
// from events recorded around launches and read back at synchronization points.
#define __CUDA_API_VERSION_INTERNAL 1
#include "interpose/recorder.h"

#include <cuda.h>
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
#include "interpose/backing.h"
#include "interpose/cupti_bridge.h"
#include "interpose/driver_device.h"
#include "interpose/hook_table.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/reentrancy.h"
#include "interpose/unhooked_function.h"
#include "profiler/callsite/call_site_table.h"
#include "profiler/callsite/unwinder.h"
#include "profiler/trace/trace_writer.h"

#ifndef SPILLWAY_VERSION
#define SPILLWAY_VERSION "unknown"
#endif

namespace spillway::interpose {

constinit std::atomic<bool> g_recording{false};

namespace {

// ---- the writer ----

enum OpenState : int { kNotOpen = 0, kOpen = 1, kFailed = 2 };
constinit std::string* g_pattern = nullptr;     // SPILLWAY_TRACE; set once, never freed
constinit std::string* g_trace_list = nullptr;  // SPILLWAY_TRACE_LIST; likewise (empty: none)

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
constinit std::atomic<bool> g_exit_handler{false};  // CollectTimesAtExit registered
std::mutex g_open_mutex;

constinit UnhookedFunction g_device_get{"cuDeviceGet", 2000};
constinit UnhookedFunction g_device_get_name{"cuDeviceGetName", 2000};
constinit UnhookedFunction g_driver_get_version{"cuDriverGetVersion", 2020};
constinit UnhookedFunction g_func_get_name{"cuFuncGetName", 12030};
constinit UnhookedFunction g_kernel_get_name{"cuKernelGetName", 12030};
constinit UnhookedFunction g_event_create{"cuEventCreate", 2000};
constinit UnhookedFunction g_event_record{"cuEventRecord", 2000};
constinit UnhookedFunction g_event_query{"cuEventQuery", 2000};
// The same signature at 2000: what a driver before 12.8 has (a request for 12080 fails there).
constinit UnhookedFunction g_event_elapsed{"cuEventElapsedTime", 12080, 2000};

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

// The header's device fields, from the real driver (best effort: "" / 0 when it cannot tell).
struct DeviceFacts {
  std::string name;
  std::string cuda_version;    // the CUDA version the driver supports (cuDriverGetVersion), "13.0"
  std::string driver_version;  // the NVIDIA kernel driver's release, "580.65.06"; see below
  uint64_t memory = 0;
};

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

DeviceFacts AskDriver() {
  DeviceFacts facts;
  const int ordinal = std::max(0, CurrentDevice());
  CUdevice device = 0;
  const auto get = Lookup<CUresult (*)(CUdevice*, int)>(g_device_get);
  if (get == nullptr || get(&device, ordinal) != CUDA_SUCCESS) device = ordinal;
  char name[256] = {};
  const auto get_name = Lookup<CUresult (*)(char*, int, CUdevice)>(g_device_get_name);
  if (get_name != nullptr && get_name(name, sizeof(name) - 1, device) == CUDA_SUCCESS) {
    facts.name = name;
  }
  int version = 0;
  const auto get_version = Lookup<CUresult (*)(int*)>(g_driver_get_version);
  if (get_version != nullptr && get_version(&version) == CUDA_SUCCESS && version > 0) {
    facts.cuda_version = std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
  }
  // simgpu has no kernel driver; elsewhere the kernel module's release, else the CUDA version.
  facts.driver_version = facts.name.rfind("simgpu", 0) == 0 ? "simgpu" : KernelDriverRelease();
  if (facts.driver_version.empty()) facts.driver_version = facts.cuda_version;
  size_t bytes = 0;
  using TotalMemFn = CUresult (*)(size_t*, CUdevice);
  const auto total =
      reinterpret_cast<TotalMemFn>(RealFunction(Index(HookId::k_cuDeviceTotalMem_v2)));
  if (total != nullptr && total(&bytes, device) == CUDA_SUCCESS) facts.memory = bytes;
  return facts;
}

// Kernel times from CUPTI when it starts (not on simgpu, whose kernels run on the host: there the
// events below time them). Otherwise, or when CUPTI is absent or held by another profiler (said
// once), SetKernelTimesFromCupti stays false and events are used.
void SayCuptiProblem(const std::string& line) {
  ReportProblem(LogLevel::kWarn, "record mode: %s", line.c_str());
}

void StartCupti(trace::TraceWriter* writer, const std::string& device_name) {
  const bool cupti = StartCuptiRecording(writer, device_name, SayCuptiProblem);
  SetKernelTimesFromCupti(cupti);
  if (cupti) Log(LogLevel::kInfo, "record mode: kernel times from CUPTI");
}

void CollectTimesAtExit();  // below, with the kernel times

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
  const std::string path = TracePathFor(*g_pattern, pid, g_forked_child.load());
  const DeviceFacts facts = AskDriver();
  const std::string job = CommandLine();
  trace::HeaderRecord header;
  header.job = job;
  header.device_name = facts.name;
  header.cuda_version = facts.cuda_version;
  header.driver_version = facts.driver_version;
  header.spillway_version = SPILLWAY_VERSION;
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
      ReportProblem(LogLevel::kWarn,
                    "SPILLWAY_TRACE: another process is recording to '%s'; this one (pid %ld) "
                    "records to '%s' (put %%p in the path for a trace per process)",
                    path.c_str(), pid, used.c_str());
    }
  }
  if (!opened.ok()) {
    g_open_state.store(kFailed, std::memory_order_release);
    g_recording.store(false, std::memory_order_relaxed);
    ReportProblem(LogLevel::kWarn,
                  "SPILLWAY_TRACE: cannot record to '%s' (%s); the job goes on as in run mode "
                  "without a trace",
                  path.c_str(), std::string(opened.status().message()).c_str());
    return nullptr;
  }
  writer = opened->release();
  g_writer.store(writer, std::memory_order_release);
  g_open_state.store(kOpen, std::memory_order_release);
  Log(LogLevel::kInfo, "recording to %s", used.c_str());
  ListTrace(used);
  // Once per process (a forked child inherits the handler, which then reads the child's events).
  if (!g_exit_handler.exchange(true)) std::atexit(CollectTimesAtExit);
  if (!g_forked_child.load()) StartCupti(writer, facts.name);
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

void SayNoStacks(const char* line) { ReportProblem(LogLevel::kWarn, "%s", line); }

uint64_t CallSiteOf(trace::TraceWriter* writer) {
  if (!callsite::UnwinderAvailable(SayNoStacks)) return 0;
  WriterSink sink(writer);
  // Skip the shim's own frames: the first frame kept is the job's call into the driver API.
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
  // While an unload is under way the handle may be a function that took an unloaded one's:
  // nothing cached by handle is used or made then (driver_device.h).
  const bool cacheable = !UnloadInFlight();
  const uint64_t generation = g_names_generation.load(std::memory_order_relaxed);
  if (cacheable && last.function == function && last.generation == generation) return last.id;
  trace::StringId id = 0;
  {
    std::lock_guard lock(g_names_mutex);
    if (g_names == nullptr) g_names = new absl::flat_hash_map<void*, trace::StringId>;
    if (const auto found = g_names->find(function); cacheable && found != g_names->end()) {
      id = found->second;
    } else {
      // A CUkernel (what the CUDA runtime launches) has its own query, which a strict driver
      // requires: cuFuncGetName documents a CUfunction.
      const char* name = nullptr;
      const auto get_name = Lookup<CUresult (*)(const char**, CUfunction)>(g_func_get_name);
      const auto get_kernel_name = Lookup<CUresult (*)(const char**, CUkernel)>(g_kernel_get_name);
      if ((get_name != nullptr &&
           get_name(&name, static_cast<CUfunction>(function)) == CUDA_SUCCESS && name != nullptr) ||
          (get_kernel_name != nullptr &&
           get_kernel_name(&name, static_cast<CUkernel>(function)) == CUDA_SUCCESS &&
           name != nullptr)) {
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
  CUevent start = nullptr;
  CUevent end = nullptr;
  uint64_t stream = 0;
};

constexpr size_t kMaxPending = 16384;  // beyond this, launches go untimed until the next sync
std::mutex g_time_mutex;
struct TimeState {
  CUevent base = nullptr;  // recorded on the legacy stream when timing started
  uint64_t base_ns = 0;    // the trace clock at that moment
  bool failed = false;     // events unusable: no timing
  std::vector<CUevent> free_events;
  std::vector<PendingTime> pending;
};
TimeState* g_times = nullptr;  // guarded by g_time_mutex; never freed
// This thread's launch in progress: its start event, taken by BeginLaunch and recorded by
// StartKernelTiming once the engine's own waits and moves for the launch are issued.
thread_local CUevent t_launch_start = nullptr;
thread_local uint64_t t_launch_stream = 0;
thread_local bool t_start_recorded = false;

CUevent TakeEvent(TimeState& times) {
  if (!times.free_events.empty()) {
    CUevent event = times.free_events.back();
    times.free_events.pop_back();
    return event;
  }
  CUevent event = nullptr;
  const auto create = Lookup<CUresult (*)(CUevent*, unsigned)>(g_event_create);
  if (create == nullptr || create(&event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return nullptr;
  return event;
}

// REQUIRES: inside an admitted CaptureTracker::NoCaptureScope (no capture begins meanwhile).
// False, nothing recorded, on a stream a capture has taken (the record would be captured, or
// invalidate the capture).
bool RecordEvent(CUevent event, uint64_t stream) {
  if (StreamTakenByCapture(reinterpret_cast<CUstream>(stream))) return false;
  const auto record = Lookup<CUresult (*)(CUevent, CUstream)>(g_event_record);
  return record != nullptr && record(event, reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS;
}

// Writes the times of finished launches; leaves the rest pending. REQUIRES: g_time_mutex held.
void CollectTimes(TimeState& times, trace::TraceWriter* writer) {
  const auto query = Lookup<CUresult (*)(CUevent)>(g_event_query);
  const auto elapsed = Lookup<CUresult (*)(float*, CUevent, CUevent)>(g_event_elapsed);
  if (query == nullptr || elapsed == nullptr) return;
  size_t kept = 0;
  for (PendingTime& pending : times.pending) {
    if (query(pending.end) == CUDA_ERROR_NOT_READY) {
      times.pending[kept++] = pending;
      continue;
    }
    float start_ms = 0;
    float end_ms = 0;
    if (elapsed(&start_ms, times.base, pending.start) == CUDA_SUCCESS &&
        elapsed(&end_ms, times.base, pending.end) == CUDA_SUCCESS) {
      trace::KernelTimeRecord record;
      record.correlation_id = pending.correlation;
      record.start_ns = times.base_ns + static_cast<uint64_t>(static_cast<double>(start_ms) * 1e6);
      record.end_ns = times.base_ns + static_cast<uint64_t>(static_cast<double>(end_ms) * 1e6);
      record.device = static_cast<uint32_t>(std::max(0, CurrentDevice()));
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

// ---- kernel times at exit ----

constexpr uint64_t kExitWaitNs = 1000000000;  // how long exit waits for unfinished launches

// Reads the events of the launches no synchronization collected (those after the job's last one),
// waiting at most kExitWaitNs for them to finish; what is still running then stays untimed (said
// once). Runs from an atexit handler registered when the trace opened, after cuInit and the CUDA
// runtime registered their own exit handlers, so it runs before those tear the context down; when
// the context is gone anyway, the queries fail and those launches are dropped without waiting.
void CollectTimesAtExit() {
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  if (writer == nullptr || g_cupti_times.load(std::memory_order_relaxed)) return;
  if (Captures().ActiveForThisThread()) return;  // a capture still open at exit: no queries
  ReentrancyGuard guard;
  const uint64_t deadline = trace::TraceClockNs() + kExitWaitNs;
  size_t left = 0;
  for (;;) {
    {
      std::unique_lock lock(g_time_mutex, std::try_to_lock);  // never block on a stuck thread
      if (lock.owns_lock()) {
        if (g_times == nullptr || g_times->pending.empty()) return;
        CollectTimes(*g_times, writer);
        left = g_times->pending.size();
        if (left == 0) return;
      }
    }
    if (trace::TraceClockNs() >= deadline) break;
    const timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
  }
  if (left > 0) {
    Log(LogLevel::kInfo, "record mode: %zu launch(es) still running at exit have no kernel time",
        left);
  }
}

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

std::string TracePathFor(const std::string& pattern, long pid, bool forked_child) {
  const std::string path = ExpandSummaryPath(pattern, pid);
  if (forked_child && path == pattern) return path + "." + std::to_string(pid);
  return path;
}

void StartRecording(const Config& config) {
  if (config.mode != Mode::kRecord) return;
  g_pattern = new std::string(config.trace_path);
  g_trace_list = new std::string(config.trace_list);
  // libunwind is loaded now, while the library initializes, rather than from the first
  // allocation's hook, where dlopen would take the loader lock from inside a CUDA call.
  callsite::UnwinderAvailable(SayNoStacks);
  pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild);
  g_recording.store(true, std::memory_order_relaxed);
}

void CloseTraceAtExit() {
  g_recording.store(false, std::memory_order_relaxed);
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  if (writer == nullptr) return;
  StopCuptiRecording();
  const absl::Status status = writer->Close();
  if (!status.ok()) {
    Log(LogLevel::kError, "SPILLWAY_TRACE: %s", std::string(status.message()).c_str());
  }
}

void SetKernelTimesFromCupti(bool cupti) { g_cupti_times.store(cupti, std::memory_order_relaxed); }

uint64_t RecordClockNs() { return trace::TraceClockNs(); }

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

uint64_t BeginLaunch(uint64_t stream) {
  const uint64_t correlation = g_correlation.fetch_add(1, std::memory_order_relaxed) + 1;
  t_launch_start = nullptr;
  if (g_cupti_times.load(std::memory_order_relaxed) || Writer() == nullptr) return correlation;
  // Untimed: a launch into a capture (its events would be captured, not run), and any launch while
  // a capture forbids this thread's unsafe calls (reading the events would invalidate it). None
  // begins before the events are recorded.
  CaptureTracker::NoCaptureScope scope(Captures());
  if (!scope.admitted() || Captures().IsCapturing(reinterpret_cast<const void*>(stream)) ||
      Captures().HoldsBack("the recorder's kernel timing")) {
    return correlation;
  }
  std::lock_guard lock(g_time_mutex);
  if (g_times == nullptr) g_times = new TimeState;
  TimeState& times = *g_times;
  if (times.failed) return correlation;
  if (times.base == nullptr) {
    // The base goes on the legacy stream, which must not meet a capture in progress.
    if (Captures().AnyInProgress()) return correlation;
    times.base = TakeEvent(times);
    if (times.base == nullptr || !RecordEvent(times.base, 0)) {
      times.failed = true;
      ReportProblem(LogLevel::kWarn, "record mode: cannot record CUDA events; no kernel times");
      return correlation;
    }
    times.base_ns = trace::TraceClockNs();
  }
  if (times.pending.size() >= kMaxPending) {
    if (trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire)) {
      CollectTimes(times, writer);
    }
    if (times.pending.size() >= kMaxPending) return correlation;  // untimed until the next sync
  }
  // Recorded by StartKernelTiming, right before the kernel: an event recorded now would also time
  // the waits the engine puts on the stream for its prefetches (not the kernel's time).
  t_launch_start = TakeEvent(times);
  t_launch_stream = stream;
  t_start_recorded = false;
  return correlation;
}

void StartKernelTiming() {
  if (t_launch_start == nullptr || t_start_recorded) return;
  CaptureTracker::NoCaptureScope scope(Captures());
  t_start_recorded = scope.admitted() && RecordEvent(t_launch_start, t_launch_stream);
}

namespace {

// Ends the kernel timing BeginLaunch started: its events become a pending time, or go back.
void EndTiming(uint64_t correlation_id, bool launched, uint64_t stream) {
  CUevent start = t_launch_start;
  const bool started = t_start_recorded;
  t_launch_start = nullptr;
  t_start_recorded = false;
  if (start == nullptr) return;
  CaptureTracker::NoCaptureScope scope(Captures());  // for RecordEvent
  std::lock_guard lock(g_time_mutex);
  TimeState& times = *g_times;
  CUevent end = launched && started && scope.admitted() ? TakeEvent(times) : nullptr;
  if (end != nullptr && RecordEvent(end, stream)) {
    times.pending.push_back(PendingTime{correlation_id, start, end, stream});
  } else {
    times.free_events.push_back(start);
    if (end != nullptr) times.free_events.push_back(end);
  }
}

// The access records of a launch: each allocation from the lowest of `words` pointing into it to
// its end (the whole allocation without one). Valid until the thread's next call.
absl::Span<const trace::AccessRecord> AccessRecords(const policy::AccessSet& accesses,
                                                    const std::vector<uint64_t>& words) {
  thread_local std::vector<trace::AccessRecord> records;  // keeps its capacity
  records.clear();
  for (const policy::Allocation& allocation : accesses) {
    uint64_t offset = allocation.size;
    for (const uint64_t word : words) {
      if (allocation.Contains(word)) offset = std::min(offset, word - allocation.base);
    }
    records.push_back(offset < allocation.size
                          ? trace::AccessRecord{allocation.id, offset, allocation.size - offset}
                          : trace::AccessRecord{allocation.id, 0, 0});
  }
  return absl::MakeConstSpan(records);
}

}  // namespace

void EndLaunch(uint64_t correlation_id, bool launched, const LaunchShape& shape,
               const policy::AccessSet& accesses, const std::vector<uint64_t>& words) {
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  EndTiming(correlation_id, launched, shape.stream);
  if (!launched || writer == nullptr) return;
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
  record.accesses = AccessRecords(accesses, words);
  writer->Write(record);
}

void EndGraphLaunch(uint64_t correlation_id, bool launched, uint64_t graph_exec, uint64_t stream,
                    const policy::AccessSet& accesses, const std::vector<uint64_t>& words) {
  trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire);
  EndTiming(correlation_id, launched, stream);
  if (!launched || writer == nullptr) return;
  trace::GraphLaunchRecord record;
  record.time_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.graph_exec = graph_exec;
  record.stream = stream;
  record.correlation_id = correlation_id;
  record.accesses = AccessRecords(accesses, words);
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

void RecordSynchronize(trace::SyncWhat what, uint64_t handle, uint64_t start_ns) {
  trace::TraceWriter* writer = Writer();
  if (writer == nullptr) return;
  trace::SynchronizeRecord record;
  record.time_ns = start_ns;
  record.end_ns = trace::TraceClockNs();
  record.thread = trace::TraceThreadId();
  record.what = what;
  record.handle = handle;
  writer->Write(record);
  // Queries would break a capture this thread's unsafe calls must not meet, or one beginning;
  // none begins while they are made.
  CaptureTracker::NoCaptureScope scope(Captures());
  if (!scope.admitted() || Captures().HoldsBack("the recorder's kernel timing")) return;
  std::lock_guard lock(g_time_mutex);
  if (g_times != nullptr && !g_times->pending.empty()) CollectTimes(*g_times, writer);
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

}  // namespace spillway::interpose
