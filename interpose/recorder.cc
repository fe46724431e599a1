// Record mode's side in the shim (recorder.h): the RecordHost the trace recorder
// (profiler/record/) asks for the driver's answers, through unhooked functions, and for the log;
// CUPTI started once the trace opens; and the capture checks around kernel timing, which records
// and reads CUDA events only where no stream capture can meet them.
#define __CUDA_API_VERSION_INTERNAL 1
#include "interpose/recorder.h"

#include <cuda.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "interpose/backing.h"
#include "interpose/cupti_bridge.h"
#include "interpose/driver_device.h"
#include "interpose/hook_table.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/reentrancy.h"
#include "interpose/unhooked_function.h"

#ifndef SPILLWAY_VERSION
#define SPILLWAY_VERSION "unknown"
#endif

namespace spillway::interpose {
namespace {

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
constinit std::atomic<bool> g_exit_handler{false};  // CollectTimesAtExit registered

void CollectTimesAtExit();

// The recorder's way to the driver and the log.
class ShimRecordHost final : public record::RecordHost {
 public:
  record::DeviceFacts AskDevice() override {
    record::DeviceFacts facts;
    const int ordinal = std::max(0, interpose::CurrentDevice());
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
      facts.cuda_version =
          std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
    }
    size_t bytes = 0;
    using TotalMemFn = CUresult (*)(size_t*, CUdevice);
    const auto total =
        reinterpret_cast<TotalMemFn>(RealFunction(Index(HookId::k_cuDeviceTotalMem_v2)));
    if (total != nullptr && total(&bytes, device) == CUDA_SUCCESS) facts.memory = bytes;
    return facts;
  }

  int CurrentDevice() override { return interpose::CurrentDevice(); }

  // A CUkernel (what the CUDA runtime launches) has its own query, which a strict driver
  // requires: cuFuncGetName documents a CUfunction.
  const char* FunctionName(void* function) override {
    const char* name = nullptr;
    const auto get_name = Lookup<CUresult (*)(const char**, CUfunction)>(g_func_get_name);
    if (get_name != nullptr && get_name(&name, static_cast<CUfunction>(function)) == CUDA_SUCCESS &&
        name != nullptr) {
      return name;
    }
    const auto get_kernel_name = Lookup<CUresult (*)(const char**, CUkernel)>(g_kernel_get_name);
    if (get_kernel_name != nullptr &&
        get_kernel_name(&name, static_cast<CUkernel>(function)) == CUDA_SUCCESS) {
      return name;
    }
    return nullptr;
  }

  // driver_device.h: while an unload is under way a handle may be a function that took an
  // unloaded one's.
  bool NamesCacheable() override { return !UnloadInFlight(); }

  void* CreateEvent() override {
    CUevent event = nullptr;
    const auto create = Lookup<CUresult (*)(CUevent*, unsigned)>(g_event_create);
    if (create == nullptr || create(&event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return nullptr;
    return event;
  }

  // REQUIRES: inside an admitted CaptureTracker::NoCaptureScope (no capture begins meanwhile).
  // Refused on a stream a capture has taken (the record would be captured, or invalidate it).
  bool RecordEvent(void* event, uint64_t stream) override {
    if (StreamTakenByCapture(reinterpret_cast<CUstream>(stream))) return false;
    const auto record = Lookup<CUresult (*)(CUevent, CUstream)>(g_event_record);
    return record != nullptr &&
           record(static_cast<CUevent>(event), reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS;
  }

  bool EventPending(void* event) override {
    const auto query = Lookup<CUresult (*)(CUevent)>(g_event_query);
    return query != nullptr && query(static_cast<CUevent>(event)) == CUDA_ERROR_NOT_READY;
  }

  bool ElapsedMs(float* ms, void* from, void* to) override {
    const auto elapsed = Lookup<CUresult (*)(float*, CUevent, CUevent)>(g_event_elapsed);
    return elapsed != nullptr &&
           elapsed(ms, static_cast<CUevent>(from), static_cast<CUevent>(to)) == CUDA_SUCCESS;
  }

  void Problem(const std::string& line) override {
    ReportProblem(LogLevel::kWarn, "%s", line.c_str());
  }
  void Info(const std::string& line) override { Log(LogLevel::kInfo, "%s", line.c_str()); }
  void Error(const std::string& line) override { Log(LogLevel::kError, "%s", line.c_str()); }

  // Kernel times from CUPTI when it starts (not on simgpu, whose kernels run on the host: there
  // events time them). Otherwise, or when CUPTI is absent or held by another profiler (said once),
  // events are used. The exit handler is registered once per process, after cuInit and the CUDA
  // runtime registered theirs, so it runs before those tear the context down (a forked child
  // inherits it, which then reads the child's events).
  void Opened(trace::TraceWriter* writer, const std::string& device_name,
              bool forked_child) override {
    if (!g_exit_handler.exchange(true)) std::atexit(CollectTimesAtExit);
    if (forked_child) return;
    const bool cupti = StartCuptiRecording(writer, device_name, SayCuptiProblem);
    record::SetKernelTimesFromCupti(cupti);
    if (cupti) Log(LogLevel::kInfo, "record mode: kernel times from CUPTI");
  }

  void BeforeClose() override { StopCuptiRecording(); }

 private:
  static void SayCuptiProblem(const std::string& line) {
    ReportProblem(LogLevel::kWarn, "record mode: %s", line.c_str());
  }
};

ShimRecordHost* Host() {
  static ShimRecordHost* host = new ShimRecordHost;  // never freed: used until exit
  return host;
}

// Launches after the job's last synchronization have their times read here, at exit; when the
// context is gone anyway the queries fail and those launches are dropped without waiting.
void CollectTimesAtExit() {
  if (Captures().ActiveForThisThread()) return;  // a capture still open at exit: no queries
  ReentrancyGuard guard;
  record::CollectTimesAtExit();
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

// Ends the kernel timing BeginLaunch began, with the end event recorded only where no capture can
// meet it.
void EndTiming(uint64_t correlation_id, bool launched, uint64_t stream) {
  if (!record::TimingBegun()) return;
  CaptureTracker::NoCaptureScope scope(Captures());  // for RecordEvent
  record::EndTiming(correlation_id, launched && scope.admitted(), stream);
}

}  // namespace

void StartRecording(const Config& config) {
  if (config.mode != Mode::kRecord) return;
  record::Start(Host(), config.trace_path, config.trace_list, ExpandSummaryPath, SPILLWAY_VERSION);
}

uint64_t BeginLaunch(uint64_t stream) {
  const uint64_t correlation = record::NextCorrelation();
  if (!record::TimesFromEvents()) return correlation;
  // Untimed: a launch into a capture (its events would be captured, not run), and any launch while
  // a capture forbids this thread's unsafe calls (reading the events would invalidate it). None
  // begins before the events are recorded.
  CaptureTracker::NoCaptureScope scope(Captures());
  if (!scope.admitted() || Captures().IsCapturing(reinterpret_cast<const void*>(stream)) ||
      Captures().HoldsBack("the recorder's kernel timing")) {
    return correlation;
  }
  // The base event goes on the legacy stream, which must not meet a capture in progress.
  record::BeginTiming(stream, /*base_allowed=*/!Captures().AnyInProgress());
  return correlation;
}

void StartKernelTiming() {
  if (!record::AwaitsStart()) return;
  CaptureTracker::NoCaptureScope scope(Captures());
  record::StartTiming(scope.admitted());
}

void EndLaunch(uint64_t correlation_id, bool launched, const LaunchShape& shape,
               const policy::AccessSet& accesses, const std::vector<uint64_t>& words) {
  EndTiming(correlation_id, launched, shape.stream);
  if (launched) record::EndLaunch(correlation_id, shape, AccessRecords(accesses, words));
}

void EndGraphLaunch(uint64_t correlation_id, bool launched, uint64_t graph_exec, uint64_t stream,
                    const policy::AccessSet& accesses, const std::vector<uint64_t>& words) {
  EndTiming(correlation_id, launched, stream);
  if (launched) {
    record::EndGraphLaunch(correlation_id, graph_exec, stream, AccessRecords(accesses, words));
  }
}

void RecordSynchronize(trace::SyncWhat what, uint64_t handle, uint64_t start_ns) {
  if (!record::RecordSynchronize(what, handle, start_ns)) return;
  // Queries would break a capture this thread's unsafe calls must not meet, or one beginning;
  // none begins while they are made.
  CaptureTracker::NoCaptureScope scope(Captures());
  if (!scope.admitted() || Captures().HoldsBack("the recorder's kernel timing")) return;
  record::CollectTimes();
}

}  // namespace spillway::interpose
