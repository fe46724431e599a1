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
#include "policy/online_plan.h"
#include "policy/planned_policy.h"

#ifndef SPILLWAY_VERSION
#define SPILLWAY_VERSION "unknown"
#endif

namespace spillway::interpose {

thread_local bool ReentrancyGuard::active_ = false;
// Every global below is constant-initialized (constinit): hooks and the library's constructor may
// run before this file's dynamic initializers would.
constinit CallCounter g_call_counts[kNumHooks];

namespace {

// ---- configuration ----

enum ConfigState : int { kConfigNone = 0, kConfigBusy = 1, kConfigDone = 2 };
constinit std::atomic<int> g_config_state{kConfigNone};
constinit std::atomic<int> g_mode{static_cast<int>(Mode::kRun)};
constinit Config* g_config = nullptr;  // set once, never freed

// ---- allocations and the engine ----

policy::AllocationRegistry& Registry() {
  static policy::AllocationRegistry* registry = new policy::AllocationRegistry;
  return *registry;
}

// The engines and their devices, one per device ordinal: each created under g_engine_mutex (no
// driver call inside), never freed. A forked child drops its parent's engines and starts anew; an
// engine whose context ended is retired and the device's next one starts in the context current
// then (OnContextEnded).
constinit std::atomic<policy::ResidencyEngine*> g_engines[kMaxDevices] = {};
constinit DriverDevice* g_devices[kMaxDevices] = {};  // guarded by g_engine_mutex
// The context current when each engine started, where its streams and events live; guarded by
// g_engine_mutex.
constinit CUcontext g_engine_contexts[kMaxDevices] = {};
// An engine retired when its context ended, and its device ordinal: kept (a thread may still be
// in it) and counted in the summary, which walks the list without a lock. Each is pushed at the
// head under g_engine_mutex, whole before it is published; none is ever freed. The node is made
// with its engine, so that a context's end allocates nothing for it (a job that reloads modules
// after each reset then gets the handles it would get without spillway).
struct RetiredEngine {
  const policy::ResidencyEngine* engine;
  int device;
  const RetiredEngine* next;
};
constinit std::atomic<const RetiredEngine*> g_retired_engines{nullptr};
constinit RetiredEngine* g_retirement_nodes[kMaxDevices] = {};  // guarded by g_engine_mutex
constinit std::atomic<uint64_t> g_launches_resolved{0};
constinit std::atomic<bool> g_engine_start_failed_reported{false};
// Devices whose ballast waits for the end of a stream capture that would refuse its cuMemAlloc
// (their engine started inside one).
constinit std::atomic<bool> g_ballast_waiting[kMaxDevices] = {};
// SPILLWAY_POLICY as read once at start-up (null without one); never freed.
constinit const absl::StatusOr<policy::PolicyFile>* g_policy_file = nullptr;
// Allocations' call sites are taken (a policy file with rules by call site or module).
constinit std::atomic<bool> g_take_call_sites{false};
std::mutex g_engine_mutex;

// ---- problems: fixed slots, lock-free append ----

constexpr int kMaxProblems = 32;
struct ProblemSlot {
  std::atomic<bool> ready{false};
  char text[256] = {};
};
constinit ProblemSlot g_problems[kMaxProblems];
constinit std::atomic<int> g_problem_count{0};

void RecordProblemText(const char* text) {
  const int slot = g_problem_count.fetch_add(1, std::memory_order_relaxed);
  if (slot >= kMaxProblems) return;
  std::snprintf(g_problems[slot].text, sizeof(g_problems[slot].text), "%s", text);
  g_problems[slot].ready.store(true, std::memory_order_release);
}

// ---- fork ----

// True in a forked child until it makes its first hooked call: such a child does not overwrite
// its parent's summary.
constinit std::atomic<bool> g_forked_child{false};

// The engine lock too, in its order before the registry's (StartEngine takes the registry's under
// it): a thread holding it at the fork would leave it held in the child.
void BeforeFork() {
  g_engine_mutex.lock();
  Registry().LockForFork();
}
void AfterForkInParent() {
  Registry().UnlockAfterFork();
  g_engine_mutex.unlock();
}
void AfterForkInChild() {
  g_engine_mutex.unlock();
  Registry().ResetInForkedChild();
  Captures().ResetInForkedChild();
  for (std::atomic<policy::ResidencyEngine*>& engine : g_engines) {
    engine.store(nullptr, std::memory_order_relaxed);
  }
  g_retired_engines.store(nullptr, std::memory_order_relaxed);  // the parent's, not counted here
  for (RetiredEngine*& node : g_retirement_nodes) node = nullptr;
  g_launches_resolved.store(0, std::memory_order_relaxed);
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
  if (g_config->mode != Mode::kOff && !g_config->device_modules.empty()) PrepareCallerWalk();
  // The policy file, read once here: rules by call site or module need each allocation's stack,
  // taken from the first allocation on; the engines use this read, and say what is wrong with
  // it, when they start.
  if (g_config->mode != Mode::kOff && !g_config->policy_file.empty()) {
    g_policy_file =
        new absl::StatusOr<policy::PolicyFile>(policy::ReadPolicyFile(g_config->policy_file));
    if (g_policy_file->ok() && (*g_policy_file)->NamesCallSites() && PrepareAllocationSites()) {
      g_take_call_sites.store(true, std::memory_order_relaxed);
    }
  }
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
  const policy::AllocationRegistry& registry = Registry();
  data.allocation_count = registry.count();
  data.bytes_peak = registry.bytes_peak();
  data.managed_bytes_peak = registry.managed_bytes_peak();
  data.vmm_count = registry.vmm_count();
  const BackingCounts backing = CountsSoFar();
  data.device_exceptions_capture = backing.capture;
  data.device_exceptions_module = backing.module;
  data.ipc_refused = backing.ipc_refused;
  data.ballast_bytes = BallastBytes();
  // Several devices: one engine each; the summary adds their counters and budgets up. An engine
  // retired when its context ended counts its moves; its device's budget counts once.
  std::vector<std::pair<int, const policy::ResidencyEngine*>> engines;
  for (const RetiredEngine* retired = g_retired_engines.load(std::memory_order_acquire);
       retired != nullptr; retired = retired->next) {
    engines.emplace_back(retired->device, retired->engine);
  }
  for (int device = 0; device < kMaxDevices; ++device) {
    const policy::ResidencyEngine* engine = g_engines[device].load(std::memory_order_acquire);
    if (engine != nullptr) engines.emplace_back(device, engine);
  }
  bool device_counted[kMaxDevices] = {};
  for (const auto& [device, engine] : engines) {
    data.engine_policy = std::string(engine->policy_name());
    if (!device_counted[device]) {
      device_counted[device] = true;
      data.engine_devices += 1;
      data.budget_bytes += engine->budget_bytes();
    }
    data.prefetch_bytes += engine->prefetch_bytes();
    data.evict_bytes += engine->evict_bytes();
    data.discard_bytes += engine->discard_bytes();
    data.overwrite_discard_bytes += engine->overwrite_discard_bytes();
    data.predicted_launches += engine->predicted_launches();
    data.step_length = std::max(data.step_length, engine->step_length());
    data.thread_steps = std::max(data.thread_steps, engine->thread_steps());
    data.reordered_launches += engine->reordered_launches();
    data.lookahead_prefetch_bytes += engine->lookahead_prefetch_bytes();
    policy::ScheduleAdherence adherence;
    if (engine->adherence(&adherence)) data.policy_file.push_back(std::move(adherence));
  }
  data.launches_resolved = g_launches_resolved.load(std::memory_order_relaxed);
  data.capture_skips = Captures().held_back();
  const int problems = std::min(g_problem_count.load(std::memory_order_relaxed), kMaxProblems);
  for (int i = 0; i < problems; ++i) {
    if (g_problems[i].ready.load(std::memory_order_acquire))
      data.errors.emplace_back(g_problems[i].text);
  }
  if (g_problem_count.load(std::memory_order_relaxed) > kMaxProblems) {
    data.errors.emplace_back("(more problems were logged than the summary keeps)");
  }
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

policy::AllocationRegistry& Allocations() { return Registry(); }

void OnContextEnded(CUcontext context) {
  if (context == nullptr) return;
  NoteContextEnded(context);
  bool retired[kMaxDevices] = {};
  // The allocations it freed, each with the engine that knew it then.
  std::vector<std::pair<policy::Allocation, policy::ResidencyEngine*>> freed;
  {
    // Under the engine lock, which StartEngine holds while it takes the registry's list: a new
    // engine starts either before the allocations are erased (and is told below) or after (and
    // never knew them).
    std::lock_guard lock(g_engine_mutex);
    for (int device = 0; device < kMaxDevices; ++device) {
      policy::ResidencyEngine* engine = g_engines[device].load(std::memory_order_acquire);
      if (engine == nullptr || g_engine_contexts[device] != context) continue;
      RetiredEngine* node = g_retirement_nodes[device];  // made with the engine (StartEngine)
      g_retirement_nodes[device] = nullptr;
      node->next = g_retired_engines.load(std::memory_order_relaxed);
      g_retired_engines.store(node, std::memory_order_release);
      g_engines[device].store(nullptr, std::memory_order_release);
      g_devices[device] = nullptr;  // the retired engine keeps its own
      g_engine_contexts[device] = nullptr;
      g_ballast_waiting[device].store(false, std::memory_order_relaxed);
      ForgetBallast(device);  // before a new engine, which places its own, can start
      retired[device] = true;
    }
    // The allocations made in it: freed by the driver.
    const uint64_t handle = reinterpret_cast<uint64_t>(context);
    for (const policy::Allocation& allocation : Registry().Snapshot()) {
      if (allocation.context != handle || !Registry().EraseIfCurrent(allocation)) continue;
      const int device = allocation.device;
      freed.emplace_back(allocation, device >= 0 && device < kMaxDevices
                                         ? g_engines[device].load(std::memory_order_acquire)
                                         : nullptr);
    }
  }
  for (int device = 0; device < kMaxDevices; ++device) {
    if (retired[device]) {
      Log(LogLevel::kInfo,
          "device %d: the context its engine started in ended; a new engine starts at its next "
          "use",
          device);
    }
  }
  for (const auto& [allocation, engine] : freed) {
    if (engine != nullptr) engine->Forget(allocation);
  }
  if (!freed.empty()) {
    Log(LogLevel::kInfo, "a context's end freed %zu allocations; spillway forgot them",
        freed.size());
  }
}

const std::vector<std::string>* DeviceModules() {
  if (g_config == nullptr || g_config->device_modules.empty()) return nullptr;
  return &g_config->device_modules;
}

namespace {

// SPILLWAY_BALLAST: reserves what device `ordinal` has beyond the engine's budget, from the
// memory free now.
void PlaceBallast(int ordinal, const policy::ResidencyEngine& engine) {
  DriverDevice* device = nullptr;
  {
    std::lock_guard lock(g_engine_mutex);
    device = g_devices[ordinal];
  }
  uint64_t free = 0, total = 0;
  if (device == nullptr || device->MemoryInfo(&free, &total) != 0 || total == 0) {
    ReportProblem(LogLevel::kWarn,
                  "SPILLWAY_BALLAST: device %d cannot report its memory; no ballast", ordinal);
    return;
  }
  StartBallast(ordinal, device, engine.budget_bytes(), free, total, g_config->ballast_headroom);
}

// Starts the engine of device `ordinal` (the current context's device).
policy::ResidencyEngine* StartEngine(int ordinal) {
  const CUcontext context = CurrentContextHandle();
  DriverDevice* device = nullptr;
  {
    std::lock_guard lock(g_engine_mutex);
    if (g_devices[ordinal] == nullptr) g_devices[ordinal] = new DriverDevice;
    device = g_devices[ordinal];
  }
  uint64_t budget = g_config->device_memory.value_or(0);
  uint64_t free = 0, total = 0;
  const bool known = device->MemoryInfo(&free, &total) == 0 && total != 0;
  // The default: physical free memory now, less 5% of the total as headroom for what is not
  // pageable.
  const uint64_t headroom = total / 20;
  const uint64_t fits = free > headroom ? free - headroom : free / 2;
  if (budget == 0) {
    if (!known) {
      if (!g_engine_start_failed_reported.exchange(true)) {
        Log(LogLevel::kInfo, "engine not started yet: the driver cannot report memory");
      }
      return nullptr;
    }
    budget = fits;
  } else if (known && budget > total) {
    // A budget the device cannot hold: the engine would count room that is not there, and the job
    // would be told of memory that does not exist. The default instead.
    ReportProblem(LogLevel::kWarn,
                  "SPILLWAY_DEVICE_MEMORY: %llu bytes is more than device %d's %llu; using %llu, "
                  "what it has free",
                  static_cast<unsigned long long>(budget), ordinal,
                  static_cast<unsigned long long>(total), static_cast<unsigned long long>(fits));
    budget = fits;
  }
  policy::ResidencyEngine* engine = nullptr;
  {
    std::lock_guard lock(g_engine_mutex);
    engine = g_engines[ordinal].load(std::memory_order_acquire);
    if (engine != nullptr) return engine;
    std::unique_ptr<policy::EvictionPolicy> eviction;
    if (g_policy_file != nullptr) {
      // A policy file (SPILLWAY_POLICY): followed once the step is recognised; one line and the
      // learned policy when it cannot be used.
      eviction = policy::PlannedPolicyFor(
          *g_policy_file, g_config->policy_file, budget,
          [](bool problem, const std::string& line) {
            if (problem) {
              ReportProblem(LogLevel::kWarn, "SPILLWAY_POLICY: %s", line.c_str());
            } else {
              Log(LogLevel::kInfo, "SPILLWAY_POLICY: %s", line.c_str());
            }
          },
          g_take_call_sites.load(std::memory_order_relaxed) ? CallSiteModules : nullptr);
    } else if (g_config->eviction == "learned" && g_config->online_plan) {
      // The learned policy that plans the detected step online (SPILLWAY_ONLINE_PLAN), on a
      // thread of its own unless asked to plan inline.
      eviction = policy::MakeOnlinePlannedPolicy(
          budget,
          [](bool problem, const std::string& line) {
            Log(problem ? LogLevel::kWarn : LogLevel::kInfo, "%s", line.c_str());
          },
          policy::PlanRecordedSteps, !g_config->online_plan_inline);
    } else {
      eviction = policy::MakePolicy(g_config->eviction);
    }
    if (eviction == nullptr) eviction = policy::MakeLearnedPolicy();  // config accepts no other
    // Managed allocations count as the 4 KiB pieces they span: nvidia-uvm backs a whole 2 MiB
    // block with one chunk and the rest of a range with 64 KiB and 4 KiB ones.
    engine = new policy::ResidencyEngine(
        device, std::move(eviction), budget,
        policy::EngineOptions{g_config->lookahead, spillway::kPieceBytes,
                              g_config->lookahead_auto});
    // Allocations made on this device before the engine started. Host placements a policy
    // file's rules give them are made at the next launch, on its stream: not on the legacy stream
    // under this lock, where a capture in progress would be invalidated by them.
    for (const policy::Allocation& allocation : Registry().Snapshot()) {
      if (allocation.device == ordinal) engine->OnAllocated(allocation, /*place_now=*/false);
    }
    g_retirement_nodes[ordinal] = new RetiredEngine{engine, ordinal, nullptr};
    g_engine_contexts[ordinal] = context;
    g_engines[ordinal].store(engine, std::memory_order_release);
  }
  Log(LogLevel::kInfo, "engine started on device %d: policy %s, budget %llu bytes", ordinal,
      std::string(engine->policy_name()).c_str(), static_cast<unsigned long long>(budget));
  if (g_config->ballast) {
    if (Captures().ActiveForThisThread()) {
      // Its cuMemAlloc would invalidate the capture: it waits for the first engine call after.
      g_ballast_waiting[ordinal].store(true, std::memory_order_release);
      Log(LogLevel::kInfo,
          "SPILLWAY_BALLAST: device %d: a stream capture is open; the ballast waits for its end",
          ordinal);
    } else {
      PlaceBallast(ordinal, *engine);
    }
  }
  return engine;
}

}  // namespace

policy::ResidencyEngine* Engine() {
  if (!EngineMode()) return nullptr;
  const int ordinal = CurrentDevice();
  if (ordinal < 0 || ordinal >= kMaxDevices) return nullptr;
  policy::ResidencyEngine* engine = g_engines[ordinal].load(std::memory_order_acquire);
  if (engine == nullptr) return StartEngine(ordinal);
  if (g_ballast_waiting[ordinal].load(std::memory_order_relaxed) &&
      !Captures().ActiveForThisThread() &&
      g_ballast_waiting[ordinal].exchange(false, std::memory_order_acq_rel)) {
    PlaceBallast(ordinal, *engine);
  }
  return engine;
}

policy::ResidencyEngine* EngineOf(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  return g_engines[device].load(std::memory_order_acquire);
}

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

void CountResolvedLaunch() { g_launches_resolved.fetch_add(1, std::memory_order_relaxed); }

policy::Allocation OnAllocated(uint64_t address, uint64_t bytes, policy::Backing backing,
                               bool stream_ordered, bool substituted) {
  const int device = std::max(0, CurrentDevice());
  const uint64_t call_site = g_take_call_sites.load(std::memory_order_relaxed)
                                 ? AllocationCallSite(reinterpret_cast<const void*>(&OnAllocated))
                                 : 0;
  const uint64_t context = reinterpret_cast<uint64_t>(CurrentContextHandle());
  const policy::Allocation allocation = Registry().Insert(address, bytes, backing, stream_ordered,
                                                          substituted, device, call_site, context);
  // Host placements go on the legacy stream, which is unusable while another thread captures a
  // blocking stream (and this thread's own default stream may be the one capturing): while any
  // capture is in progress they wait for the next launch, which makes them on its stream before
  // its kernel.
  if (policy::ResidencyEngine* engine = EngineOf(device)) {
    CaptureTracker::NoCaptureScope scope(Captures());  // none begins before they are made
    engine->OnAllocated(allocation,
                        /*place_now=*/scope.admitted() && !Captures().AnyInProgress());
  }
  return allocation;
}

void OnFreed(uint64_t address) {
  const std::optional<policy::Allocation> allocation = Registry().Erase(address);
  if (!allocation.has_value()) return;
  if (policy::ResidencyEngine* engine = EngineOf(allocation->device)) engine->Forget(*allocation);
}

void OnVmmCreated() { Registry().CountVmm(); }

void ReportProblem(LogLevel level, const char* format, ...) {
  char text[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  Log(level, "%s", text);
  RecordProblemText(text);
}

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
