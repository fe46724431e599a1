// The CUPTI recorder (cupti_recorder.h): CUPTI's callbacks are plain C functions without user
// data, so the recorder is one process-wide state, created on first use and never destroyed (its
// callbacks may run during exit).
#include "profiler/cupti/cupti_recorder.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "profiler/cupti/correlation_table.h"
#include "profiler/cupti/cupti_convert.h"
#include "profiler/cupti/cupti_library.h"
#include "profiler/trace/trace_records.h"

namespace spillway::cupti {
namespace {

thread_local uint64_t t_correlation_id = 0;

// The driver calls whose CUPTI correlation ids are mapped to the caller's.
constexpr CUpti_CallbackId kCorrelatedCalls[] = {
#define SPILLWAY_CUPTI_CBID(name) CUPTI_DRIVER_TRACE_CBID_##name,
#include "profiler/cupti/correlated_driver_calls.inc"
#undef SPILLWAY_CUPTI_CBID
};

struct Counters {
  std::atomic<uint64_t> kernels{0}, memcpys{0}, memsets{0}, uvm_counters{0}, memory_events{0},
      uncorrelated{0}, cupti_dropped{0}, buffers{0}, uvm_unconverted{0};
};

struct Recorder {
  std::mutex mu;  // Start/Stop
  bool active = false;
  std::optional<LoadedCupti> cupti;
  CUpti_SubscriberHandle subscriber = nullptr;
  CuptiRecorderOptions options;
  std::unique_ptr<CorrelationTable> table;
  std::atomic<bool> caller_ids{true};
  std::atomic<int64_t> clock_offset_ns{0};
  std::atomic<bool> uvm_pending{false};  // configure the UVM counters at the first context
  std::atomic<bool> uvm_enabled{false};
  bool clock_callback = false;

  std::mutex sink_mu;  // the sink is called and cleared under it
  CuptiSink* sink = nullptr;

  std::mutex log_mu;
  bool said_unavailable = false, said_uvm = false, said_flush = false, said_callbacks = false;
  std::function<void(const std::string&)> log;

  Counters counters;
};

Recorder& R() {
  static Recorder* recorder = new Recorder;
  return *recorder;
}

// Says `line` through the caller's log function unless `said` is already set.
void SayOnce(bool Recorder::*said, const std::string& line) {
  Recorder& r = R();
  std::function<void(const std::string&)> log;
  {
    std::lock_guard<std::mutex> lock(r.log_mu);
    if (r.*said) return;
    r.*said = true;
    log = r.log;
  }
  if (log) log(line);
}

std::string ResultString(CUptiResult result) {
  const char* text = nullptr;
  if (R().cupti.has_value() && R().cupti->functions.GetResultString != nullptr &&
      R().cupti->functions.GetResultString(result, &text) == CUPTI_SUCCESS && text != nullptr) {
    return text;
  }
  return absl::StrCat("CUPTI error ", static_cast<int>(result));
}

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t CUPTIAPI TraceClockCallback() { return MonotonicNs(); }

// trace clock - CUPTI clock, from the closest of a few paired readings.
int64_t MeasureClockOffset(const CuptiFunctions& f) {
  int64_t best_offset = 0;
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    uint64_t cupti_ns = 0;
    const uint64_t before = MonotonicNs();
    if (f.GetTimestamp(&cupti_ns) != CUPTI_SUCCESS) return 0;
    const uint64_t after = MonotonicNs();
    if (after - before < best_width) {
      best_width = after - before;
      best_offset =
          static_cast<int64_t>(before + (after - before) / 2) - static_cast<int64_t>(cupti_ns);
    }
  }
  return best_offset;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const size_t bytes = (R().options.buffer_bytes + 7) & ~size_t{7};
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer != nullptr ? bytes : 0;
  *max_records = 0;
}

uint64_t CallerId(uint32_t cupti_id, uint32_t graph_id) {
  Recorder& r = R();
  if (!r.caller_ids.load(std::memory_order_relaxed)) return cupti_id;
  const uint64_t id = r.table->Get(cupti_id, /*erase=*/graph_id == 0);
  if (id == 0) r.counters.uncorrelated.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void Dispatch(const CUpti_Activity* record, CuptiSink& sink, int64_t offset) {
  Counters& c = R().counters;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      KernelDetails details;
      details.name = k.name;
      details.grid[0] = k.gridX, details.grid[1] = k.gridY, details.grid[2] = k.gridZ;
      details.block[0] = k.blockX, details.block[1] = k.blockY, details.block[2] = k.blockZ;
      details.shared_memory_bytes = static_cast<uint32_t>(std::max(0, k.staticSharedMemory) +
                                                          std::max(0, k.dynamicSharedMemory));
      details.cupti_correlation_id = k.correlationId;
      details.graph_id = k.graphId;
      sink.OnKernelTime(KernelTime(k, CallerId(k.correlationId, k.graphId), offset), &details);
      c.kernels.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      sink.OnKernelTime(MemcpyTime(m, CallerId(m.correlationId, m.graphId), offset), nullptr);
      c.memcpys.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      sink.OnKernelTime(MemsetTime(m, CallerId(m.correlationId, m.graphId), offset), nullptr);
      c.memsets.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
      const auto& u = *reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(record);
      if (std::optional<trace::UvmCounterRecord> out = UvmCounter(u, offset)) {
        sink.OnUvmCounter(*out);
        c.uvm_counters.fetch_add(1, std::memory_order_relaxed);
      } else {
        c.uvm_unconverted.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemory4*>(record);
      if (std::optional<MemoryEvent> event = MemoryEventOf(m, offset)) {
        sink.OnMemory(*event);
        c.memory_events.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                              size_t /*size*/, size_t valid_size) {
  Recorder& r = R();
  const CuptiFunctions& f = r.cupti->functions;
  {
    std::lock_guard<std::mutex> lock(r.sink_mu);
    if (r.sink != nullptr && valid_size > 0) {
      const int64_t offset = r.clock_offset_ns.load(std::memory_order_relaxed);
      CUpti_Activity* record = nullptr;
      while (f.ActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
        Dispatch(record, *r.sink, offset);
      }
    }
  }
  size_t dropped = 0;
  if (f.ActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
    r.counters.cupti_dropped.fetch_add(dropped, std::memory_order_relaxed);
  }
  r.counters.buffers.fetch_add(1, std::memory_order_relaxed);
  std::free(buffer);
}

// Configures and enables the unified-memory counters; on failure sets `why`.
CUptiResult EnableUvmCounters(const CuptiFunctions& f, std::string& why) {
  const CUpti_ActivityUnifiedMemoryCounterKind kinds[] = {
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP,
  };
  CUpti_ActivityUnifiedMemoryCounterConfig config[std::size(kinds)] = {};
  for (size_t i = 0; i < std::size(kinds); ++i) {
    config[i].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES;
    config[i].kind = kinds[i];
    config[i].deviceId = 0;
    config[i].enable = 1;
  }
  CUptiResult result =
      f.ActivityConfigureUnifiedMemoryCounter(config, static_cast<uint32_t>(std::size(kinds)));
  if (result != CUPTI_SUCCESS && result != CUPTI_ERROR_NOT_INITIALIZED) {
    // One kind the platform refuses (throttling or remote maps on some) refuses the whole list:
    // each kind on its own, keeping those taken. Transfers and GPU faults are what matter most.
    std::string refused;
    CUptiResult first_refusal = result;
    int taken = 0;
    for (CUpti_ActivityUnifiedMemoryCounterConfig& one : config) {
      const CUptiResult alone = f.ActivityConfigureUnifiedMemoryCounter(&one, 1);
      if (alone == CUPTI_SUCCESS) {
        ++taken;
        continue;
      }
      if (first_refusal == result) first_refusal = alone;
      const std::optional<trace::UvmKind> kind = UvmKindOf(one.kind);
      absl::StrAppend(&refused, refused.empty() ? "" : ", ",
                      kind ? trace::UvmKindName(*kind) : "another kind");
    }
    if (taken == 0) {
      why = absl::StrCat("cuptiActivityConfigureUnifiedMemoryCounter: ", ResultString(result));
      return result;
    }
    SayOnce(&Recorder::said_uvm,
            absl::StrCat("CUPTI unified-memory counters: ", refused, " refused on this platform (",
                         ResultString(first_refusal), "); recording the other ", taken));
    result = CUPTI_SUCCESS;
  }
  if (result != CUPTI_SUCCESS) {
    why = absl::StrCat("cuptiActivityConfigureUnifiedMemoryCounter: ", ResultString(result));
    return result;
  }
  result = f.ActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  if (result != CUPTI_SUCCESS) {
    why = absl::StrCat("enabling UNIFIED_MEMORY_COUNTER: ", ResultString(result));
    return result;
  }
  R().uvm_enabled.store(true);
  return CUPTI_SUCCESS;
}

void SayUvmUnavailable(const std::string& why) {
  SayOnce(&Recorder::said_uvm,
          absl::StrCat("CUPTI unified-memory counters unavailable (", why,
                       "); recording kernel times without UVM faults and migrations"));
}

void CUPTIAPI ApiCallback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  Recorder& r = R();
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const uint64_t id = t_correlation_id;
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    if (id != 0 && info->callbackSite == CUPTI_API_ENTER) r.table->Put(info->correlationId, id);
    return;
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED &&
      r.uvm_pending.exchange(false)) {
    std::string why;
    if (EnableUvmCounters(r.cupti->functions, why) != CUPTI_SUCCESS) SayUvmUnavailable(why);
  }
}

// Undoes a partial start. REQUIRES: r.mu held.
void Unwind(Recorder& r, bool registered) {
  const CuptiFunctions& f = r.cupti->functions;
  if (registered) {
    for (CUpti_ActivityKind kind :
         {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
          CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2,
          CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER}) {
      f.ActivityDisable(kind);
    }
  }
  if (r.subscriber != nullptr) f.Unsubscribe(r.subscriber);
  r.subscriber = nullptr;
  r.uvm_pending.store(false);
  r.uvm_enabled.store(false);
}

absl::Status Unavailable(absl::Status status) {
  SayOnce(&Recorder::said_unavailable,
          absl::StrCat(status.message(),
                       "; recording without CUPTI (no device kernel times from "
                       "CUPTI, no UVM counters)"));
  return status;
}

// REQUIRES: r.mu held, r.cupti loaded.
absl::Status StartLoaded(Recorder& r) {
  const CuptiFunctions& f = r.cupti->functions;
  CUptiResult result = f.Subscribe(&r.subscriber, &ApiCallback, nullptr);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    r.subscriber = nullptr;
    return Unavailable(absl::AlreadyExistsError(
        "CUPTI is already in use by another profiler (Nsight Systems/Compute, torch.profiler, "
        "cuda-gdb, ...)"));
  }
  if (result != CUPTI_SUCCESS) {
    r.subscriber = nullptr;
    return Unavailable(absl::FailedPreconditionError(
        absl::StrCat("CUPTI (", r.cupti->path, ") did not start: ", ResultString(result))));
  }
  if (r.options.caller_correlation_ids) {
    int enabled = 0;
    for (CUpti_CallbackId cbid : kCorrelatedCalls) {
      enabled +=
          f.EnableCallback(1, r.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid) == CUPTI_SUCCESS;
    }
    if (enabled == 0) {
      SayOnce(&Recorder::said_callbacks,
              "CUPTI driver callbacks unavailable: device times will not be matched to launches");
    }
  }
  r.clock_callback = f.ActivityRegisterTimestampCallback != nullptr &&
                     f.ActivityRegisterTimestampCallback(&TraceClockCallback) == CUPTI_SUCCESS;
  r.clock_offset_ns.store(r.clock_callback ? 0 : MeasureClockOffset(f));
  result = f.ActivityRegisterCallbacks(&BufferRequested, &BufferCompleted);
  if (result == CUPTI_SUCCESS) result = f.ActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (result != CUPTI_SUCCESS) {
    Unwind(r, /*registered=*/true);
    return Unavailable(absl::FailedPreconditionError(
        absl::StrCat("CUPTI (", r.cupti->path, ") cannot record kernels: ", ResultString(result))));
  }
  f.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  f.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  if (r.options.memory_activity) f.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2);
  if (r.options.unified_memory_counters) {
    std::string why;
    const CUptiResult uvm = EnableUvmCounters(f, why);
    if (uvm == CUPTI_ERROR_NOT_INITIALIZED) {
      // Before the driver is initialized (the injection library starts inside cuInit) the
      // configuration is refused: retry when the first context is created.
      r.uvm_pending.store(true);
      if (f.EnableCallback(1, r.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                           CUPTI_CBID_RESOURCE_CONTEXT_CREATED) != CUPTI_SUCCESS) {
        r.uvm_pending.store(false);
        SayUvmUnavailable(why);
      }
    } else if (uvm != CUPTI_SUCCESS) {
      SayUvmUnavailable(why);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status StartCuptiRecorder(const CuptiRecorderOptions& options) {
  Recorder& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.active) return absl::OkStatus();
  {
    std::lock_guard<std::mutex> log_lock(r.log_mu);
    r.log = options.log;
  }
  if (options.sink == nullptr) return absl::InvalidArgumentError("CUPTI recorder: no sink");
  std::string library = options.library;
  if (library.empty()) library = std::string(GetEnv("SPILLWAY_CUPTI").value_or(""));
  if (library == "off" || library == "0" || library == "none") {
    return Unavailable(absl::CancelledError("CUPTI disabled by SPILLWAY_CUPTI=" + library));
  }
  // Loaded again at each start (dlopen only counts a reference) so the checks always run.
  absl::StatusOr<LoadedCupti> loaded =
      LoadCupti(CuptiCandidates(library, GetEnv("CUDA_HOME").value_or(""),
                                GetEnv("CUDA_PATH").value_or(""), LoadedObjectPaths()));
  if (!loaded.ok()) return Unavailable(loaded.status());
  r.cupti = *std::move(loaded);
  r.options = options;
  r.options.buffer_bytes = std::max<size_t>(options.buffer_bytes, 64 * 1024);
  size_t slots = 1;
  while (slots < std::max<size_t>(options.correlation_slots, 2)) slots <<= 1;
  if (r.table == nullptr || r.table->slots() != slots)
    r.table = std::make_unique<CorrelationTable>(slots);
  r.caller_ids.store(options.caller_correlation_ids);
  r.uvm_enabled.store(false);
  r.uvm_pending.store(false);
  {
    std::lock_guard<std::mutex> sink_lock(r.sink_mu);
    r.sink = options.sink;
  }
  absl::Status status = StartLoaded(r);
  if (!status.ok()) {
    std::lock_guard<std::mutex> sink_lock(r.sink_mu);
    r.sink = nullptr;
    return status;
  }
  r.active = true;
  return absl::OkStatus();
}

absl::Status StopCuptiRecorder(absl::Duration max_wait) {
  Recorder& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.active) return absl::OkStatus();
  // The forced flush can block (it waits for the device); run it apart and wait a bounded time.
  struct Flush {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto flush = std::make_shared<Flush>();
  auto flush_all = r.cupti->functions.ActivityFlushAll;
  std::thread([flush, flush_all] {
    flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> flush_lock(flush->mu);
    flush->done = true;
    flush->cv.notify_all();
  }).detach();
  bool finished;
  {
    std::unique_lock<std::mutex> flush_lock(flush->mu);
    finished = flush->cv.wait_for(flush_lock, absl::ToChronoNanoseconds(max_wait),
                                  [&] { return flush->done; });
  }
  {
    std::lock_guard<std::mutex> sink_lock(r.sink_mu);
    r.sink = nullptr;
  }
  r.active = false;
  r.uvm_enabled.store(false);
  if (!finished) {
    // The flush still runs: leave CUPTI as it is (the process is normally exiting).
    const std::string line =
        absl::StrCat("CUPTI flush did not finish in ", absl::FormatDuration(max_wait),
                     "; records still inside CUPTI are lost");
    SayOnce(&Recorder::said_flush, line);
    return absl::DeadlineExceededError(line);
  }
  Unwind(r, /*registered=*/true);
  return absl::OkStatus();
}

bool CuptiRecorderActive() {
  Recorder& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.active;
}

CuptiRecorderStats GetCuptiRecorderStats() {
  Recorder& r = R();
  const Counters& c = r.counters;
  CuptiRecorderStats s;
  s.kernels = c.kernels.load();
  s.memcpys = c.memcpys.load();
  s.memsets = c.memsets.load();
  s.uvm_counters = c.uvm_counters.load();
  s.memory_events = c.memory_events.load();
  s.uncorrelated = c.uncorrelated.load();
  s.cupti_dropped = c.cupti_dropped.load();
  s.buffers = c.buffers.load();
  s.uvm_unconverted = c.uvm_unconverted.load();
  s.uvm_enabled = r.uvm_enabled.load();
  std::lock_guard<std::mutex> lock(r.mu);
  s.clock_callback = r.clock_callback;
  return s;
}

void ResetCuptiRecorderMessagesForTesting() {
  Recorder& r = R();
  std::lock_guard<std::mutex> lock(r.log_mu);
  r.said_unavailable = r.said_uvm = r.said_flush = r.said_callbacks = false;
}

CuptiCorrelationScope::CuptiCorrelationScope(uint64_t correlation_id)
    : previous_(t_correlation_id) {
  t_correlation_id = correlation_id;
}

CuptiCorrelationScope::~CuptiCorrelationScope() { t_correlation_id = previous_; }

}  // namespace spillway::cupti
