// Configuration, counters, the allocation registry, recorded problems, fork handling and the exit
// summary. Objects that must outlive static destruction (the summary is written from a destructor
// function, after static destructors ran) are allocated once and never freed.
#include "interpose/runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/cost_model.h"
#include "common/output_file.h"
#include "interpose/allocation_sites.h"
#include "interpose/backing.h"
#include "interpose/caller_module.h"
#include "interpose/context_end.h"
#include "interpose/driver_device.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/recorder.h"
#include "interpose/summary.h"
#include "policy/front_door.h"

#ifndef SPILLWAY_VERSION
#define SPILLWAY_VERSION "unknown"
#endif

namespace spillway::interpose {

// Every global below is constant-initialized (constinit): hooks and the library's constructor may
// run before this file's dynamic initializers would.
constinit CallCounter g_call_counts[kNumHooks];

namespace {

// ---- configuration ----

enum ConfigState : int { kConfigNone = 0, kConfigBusy = 1, kConfigDone = 2 };
constinit std::atomic<int> g_config_state{kConfigNone};
constinit std::atomic<int> g_mode{static_cast<int>(Mode::kRun)};
constinit Config* g_config = nullptr;  // set once, never freed

// ---- allocations and the engines: the front door (policy/front_door.h) ----

// Made at the end of Configure, never freed (the summary is written after static destructors).
constinit std::atomic<policy::FrontDoor*> g_front{nullptr};
// Devices whose ballast waits for the end of a stream capture that would refuse its cuMemAlloc
// (their engine started inside one).
constinit std::atomic<bool> g_ballast_waiting[kMaxDevices] = {};
// Allocations' call sites are taken (a policy file with rules by call site or module).
constinit std::atomic<bool> g_take_call_sites{false};

// ---- fork ----

// True in a forked child until it makes its first hooked call: such a child does not overwrite
// its parent's summary.
constinit std::atomic<bool> g_forked_child{false};

// The front door's locks (engine starts, then the registry): a thread holding one at the fork
// would leave it held in the child.
void BeforeFork() {
  if (policy::FrontDoor* front = g_front.load(std::memory_order_acquire)) front->LockForFork();
}
void AfterForkInParent() {
  if (policy::FrontDoor* front = g_front.load(std::memory_order_acquire)) front->UnlockAfterFork();
}
void AfterForkInChild() {
  if (policy::FrontDoor* front = g_front.load(std::memory_order_acquire)) {
    front->ResetInForkedChild();
  }
  Captures().ResetInForkedChild();
  for (CallCounter& counter : g_call_counts) counter.value.store(0, std::memory_order_relaxed);
  g_forked_child.store(true, std::memory_order_relaxed);
  ResetDriverAfterFork();
}

int OpenLogFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  return fd;
}

void Configure() {
  g_config = new Config(ReadConfigFromEnvironment());
  int fd = STDERR_FILENO;
  bool log_file_failed = false;
  if (!g_config->log_file.empty()) {
    const int opened = OpenLogFile(g_config->log_file);
    if (opened >= 0) {
      fd = opened;
    } else {
      log_file_failed = true;
    }
  }
  SetLogSink(g_config->log_level, fd);
  g_mode.store(static_cast<int>(g_config->mode), std::memory_order_relaxed);
  if (log_file_failed) {
    g_config->problems.insert(
        g_config->problems.begin(),
        "SPILLWAY_LOG_FILE: cannot open '" + g_config->log_file + "'; logging to stderr");
  }
  Log(LogLevel::kInfo, "mode %s, version %s", std::string(ModeName(g_config->mode)).c_str(),
      SPILLWAY_VERSION);
  pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild);
  StartRecording(*g_config);  // first: it says once if libunwind is missing in record mode
  // The caller-module check walks with libunwind when it loads (silently glibc's walk otherwise).
  if (g_config->mode != Mode::kOff && !g_config->device_modules.empty()) {
    PrepareCallerWalk();
    SetDeviceModules(&g_config->device_modules);
  }
  // The policy file, read once here: rules by call site or module need each allocation's stack,
  // taken from the first allocation on; the engines use this read, and say what is wrong with
  // it, when they start.
  policy::EngineSettings settings;
  settings.device_memory = g_config->device_memory.value_or(0);
  settings.eviction = g_config->eviction;
  settings.online_plan = g_config->online_plan;
  settings.online_plan_inline = g_config->online_plan_inline;
  settings.lookahead = g_config->lookahead;
  settings.lookahead_auto = g_config->lookahead_auto;
  if (g_config->mode != Mode::kOff && !g_config->policy_file.empty()) {
    settings.policy_path = g_config->policy_file;
    settings.policy_file = policy::ReadPolicyFile(g_config->policy_file);
    if (settings.policy_file->ok() && (*settings.policy_file)->NamesCallSites() &&
        PrepareAllocationSites()) {
      g_take_call_sites.store(true, std::memory_order_relaxed);
      settings.call_site_modules = CallSiteModules;
    }
  }
  policy::EngineLog log;
  log.info = [](const std::string& line) { Log(LogLevel::kInfo, "%s", line.c_str()); };
  log.warn = [](const std::string& line) { Log(LogLevel::kWarn, "%s", line.c_str()); };
  log.problem = [](const std::string& line) { ReportProblem(LogLevel::kWarn, "%s", line.c_str()); };
  g_front.store(
      new policy::FrontDoor(std::move(settings), std::move(log), [] { return new DriverDevice; }),
      std::memory_order_release);
}

bool MadeAnyCall() {
  for (const CallCounter& counter : g_call_counts) {
    if (counter.value.load(std::memory_order_relaxed) != 0) return true;
  }
  return false;
}

SummaryData CollectSummary() {
  SummaryData data;
  data.version = SPILLWAY_VERSION;
  data.mode = std::string(ModeName(CurrentMode()));
  data.pid = static_cast<long>(::getpid());
  data.driver = DriverPath();
  for (int i = 0; i < kNumHooks; ++i) {
    const uint64_t count = g_call_counts[i].value.load(std::memory_order_relaxed);
    if (count == 0) continue;
    data.calls.emplace_back(kHookInfo[i].name, count);
    if (KindOf(i) == HookKind::kLaunch) data.launches += count;
    if (KindOf(i) == HookKind::kGraphLaunch) data.graph_launches += count;
  }
  const policy::FrontDoor& front = Front();
  const policy::AllocationRegistry& registry = front.registry();
  data.allocation_count = registry.count();
  data.bytes_peak = registry.bytes_peak();
  data.managed_bytes_peak = registry.managed_bytes_peak();
  data.vmm_count = registry.vmm_count();
  const BackingCounts backing = CountsSoFar();
  data.device_exceptions_capture = backing.capture;
  data.device_exceptions_module = backing.module;
  data.ipc_refused = backing.ipc_refused;
  data.ballast_bytes = BallastBytes();
  // Several devices: one engine each; the summary adds their counters and budgets up.
  policy::EngineTotals totals = front.Totals();
  data.engine_policy = std::move(totals.policy);
  data.engine_devices = totals.devices;
  data.budget_bytes = totals.budget_bytes;
  data.prefetch_bytes = totals.prefetch_bytes;
  data.evict_bytes = totals.evict_bytes;
  data.discard_bytes = totals.discard_bytes;
  data.overwrite_discard_bytes = totals.overwrite_discard_bytes;
  data.predicted_launches = totals.predicted_launches;
  data.step_length = totals.step_length;
  data.thread_steps = totals.thread_steps;
  data.reordered_launches = totals.reordered_launches;
  data.lookahead_prefetch_bytes = totals.lookahead_prefetch_bytes;
  data.policy_file = std::move(totals.policy_file);
  data.launches_resolved = front.launches_resolved();
  data.capture_skips = Captures().held_back();
  data.errors = KeptProblems();
  return data;
}

}  // namespace

void ReportConfigProblemsOnce() {
  static constinit std::atomic<bool> reported{false};
  if (g_config == nullptr || reported.exchange(true)) return;
  for (const std::string& problem : g_config->problems) {
    // An unknown mode is an error (the job runs without spillway); a bad log setting a warning.
    const bool is_error = problem.rfind("SPILLWAY_LOG", 0) != 0;
    ReportProblem(is_error ? LogLevel::kError : LogLevel::kWarn, "%s", problem.c_str());
  }
}

void EnsureConfigured() {
  if (g_config_state.load(std::memory_order_acquire) == kConfigDone) return;
  for (;;) {
    int state = g_config_state.load(std::memory_order_acquire);
    if (state == kConfigDone) return;
    if (state == kConfigBusy) {
      sched_yield();
      continue;
    }
    if (g_config_state.compare_exchange_strong(state, kConfigBusy, std::memory_order_acq_rel)) {
      Configure();
      g_config_state.store(kConfigDone, std::memory_order_release);
      return;
    }
  }
}

Mode CurrentMode() { return static_cast<Mode>(g_mode.load(std::memory_order_relaxed)); }

policy::FrontDoor& Front() {
  EnsureConfigured();
  return *g_front.load(std::memory_order_acquire);
}

policy::AllocationRegistry& Allocations() { return Front().registry(); }

void OnContextEnded(CUcontext context) {
  if (context == nullptr) return;
  NoteContextEnded(context);
  size_t freed = 0;
  const uint64_t retired = Front().ContextEnded(
      reinterpret_cast<uint64_t>(context),
      [](int device) {
        g_ballast_waiting[device].store(false, std::memory_order_relaxed);
        ForgetBallast(device);  // before a new engine places its own
      },
      &freed);
  for (int device = 0; device < kMaxDevices; ++device) {
    if ((retired >> device) & 1) {
      Log(LogLevel::kInfo,
          "device %d: the context its engine started in ended; a new engine starts at its next "
          "use",
          device);
    }
  }
  if (freed != 0) {
    Log(LogLevel::kInfo, "a context's end freed %zu allocations; spillway forgot them", freed);
  }
}

namespace {

// SPILLWAY_BALLAST: reserves what device `ordinal` has beyond the engine's budget, from the
// memory free now.
void PlaceBallast(int ordinal, const policy::ResidencyEngine& engine) {
  policy::Device* device = Front().DeviceOf(ordinal);
  uint64_t free = 0, total = 0;
  if (device == nullptr || device->MemoryInfo(&free, &total) != 0 || total == 0) {
    ReportProblem(LogLevel::kWarn,
                  "SPILLWAY_BALLAST: device %d cannot report its memory; no ballast", ordinal);
    return;
  }
  StartBallast(ordinal, device, engine.budget_bytes(), free, total, g_config->ballast_headroom);
}

}  // namespace

policy::ResidencyEngine* Engine() {
  if (!EngineMode()) return nullptr;
  const int ordinal = CurrentDevice();
  if (ordinal < 0 || ordinal >= kMaxDevices) return nullptr;
  bool started = false;
  policy::ResidencyEngine* engine =
      Front().Engine(ordinal, reinterpret_cast<uint64_t>(CurrentContextHandle()), &started);
  if (engine == nullptr) return nullptr;
  if (started) {
    if (!g_config->ballast) return engine;
    if (Captures().ActiveForThisThread()) {
      // Its cuMemAlloc would invalidate the capture: it waits for the first engine call after.
      g_ballast_waiting[ordinal].store(true, std::memory_order_release);
      Log(LogLevel::kInfo,
          "SPILLWAY_BALLAST: device %d: a stream capture is open; the ballast waits for its end",
          ordinal);
    } else {
      PlaceBallast(ordinal, *engine);
    }
    return engine;
  }
  if (g_ballast_waiting[ordinal].load(std::memory_order_relaxed) &&
      !Captures().ActiveForThisThread() &&
      g_ballast_waiting[ordinal].exchange(false, std::memory_order_acq_rel)) {
    PlaceBallast(ordinal, *engine);
  }
  return engine;
}

policy::ResidencyEngine* EngineOf(int device) { return Front().EngineOf(device); }

uint64_t ReportedTotal(uint64_t physical_total, int device) {
  const policy::ResidencyEngine* engine = device < 0 ? Engine() : EngineOf(device);
  uint64_t budget = engine != nullptr ? engine->budget_bytes() : 0;
  if (engine == nullptr && EngineMode()) {
    budget =
        std::min(g_config->device_memory.value_or(0), physical_total);  // as StartEngine bounds it
  }
  if (budget == 0) return physical_total;
  const uint64_t host = g_config->host_memory;
  const uint64_t told = budget > UINT64_MAX - host ? UINT64_MAX : budget + host;  // no wrap
  return std::max(physical_total, told);
}

policy::Allocation OnAllocated(uint64_t address, uint64_t bytes, policy::Backing backing,
                               bool stream_ordered, bool substituted) {
  const int device = std::max(0, CurrentDevice());
  const uint64_t call_site = g_take_call_sites.load(std::memory_order_relaxed)
                                 ? AllocationCallSite(reinterpret_cast<const void*>(&OnAllocated))
                                 : 0;
  const uint64_t context = reinterpret_cast<uint64_t>(CurrentContextHandle());
  // Host placements go on the legacy stream, which is unusable while another thread captures a
  // blocking stream (and this thread's own default stream may be the one capturing): while any
  // capture is in progress they wait for the next launch, which makes them on its stream before
  // its kernel.
  policy::FrontDoor& front = Front();
  if (front.EngineOf(device) == nullptr) {
    return front.Allocated(address, bytes, backing, stream_ordered, substituted, device, call_site,
                           context, /*place_now=*/false);
  }
  CaptureTracker::NoCaptureScope scope(Captures());  // none begins before they are made
  return front.Allocated(address, bytes, backing, stream_ordered, substituted, device, call_site,
                         context, /*place_now=*/scope.admitted() && !Captures().AnyInProgress());
}

void OnFreed(uint64_t address) { Front().Freed(address); }

void OnVmmCreated() { Front().registry().CountVmm(); }

void WriteSummaryAtExit() {
  if (g_config_state.load(std::memory_order_acquire) != kConfigDone) return;
  if (g_config == nullptr || g_config->summary_path.empty()) return;
  const std::string path = ExpandSummaryPath(g_config->summary_path, ::getpid());
  const bool made_calls = MadeAnyCall();
  // A process that never reached a hook (a shell around the job, a forked helper) does not
  // replace a summary another process of the job already wrote.
  if (!made_calls && (g_forked_child.load() || ::access(path.c_str(), F_OK) == 0)) return;
  const absl::Status status = WriteFileAtomically(path, FormatSummary(CollectSummary()));
  if (!status.ok()) {
    Log(LogLevel::kError, "SPILLWAY_SUMMARY: %s", std::string(status.message()).c_str());
  }
}

}  // namespace spillway::interpose
