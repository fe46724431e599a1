// A fake libcupti for the CPU tests of the CUPTI recorder (cupti_recorder_test.cc): the handful
// of CUPTI functions the recorder resolves, with behaviour a test selects (FakeCuptiSetMode) and
// activity records a test queues, delivered through the recorder's buffer callbacks on flush.
// Its clock runs 1000 s ahead of CLOCK_MONOTONIC and it has no timestamp callback, so the
// recorder must measure and apply the offset.
#include <cupti.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr uint64_t kClockAheadNs = 1000ull * 1000000000ull;

enum Mode : int {
  kOk = 0,
  kMultipleSubscribers = 1,
  kOldVersion = 2,
  kUvmBeforeInit = 3,  // the first UVM configuration is refused with NOT_INITIALIZED
  kSlowFlush = 4,      // a forced flush takes 3 s
  kNoUvm = 5,          // the device does not support UVM counters
  kNoThrottling = 6,   // a configuration that lists the throttling counter is refused
};

struct Fake {
  std::mutex mu;
  int mode = kOk;
  CUpti_CallbackFunc callback = nullptr;
  std::set<std::pair<int, int>> enabled_callbacks;  // (domain, cbid)
  std::set<int> enabled_kinds;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  std::vector<std::vector<uint8_t>> queued;
  std::set<int> uvm_configured;  // the counter kinds enabled (a configuration adds or removes)
  bool uvm_refused_once = false;
  size_t dropped = 0;
  bool force_queue = false;  // queue records of disabled kinds too
  int generation = 0;        // counts resets: a slow flush from an earlier test then does nothing
};

Fake& F() {
  static Fake* fake = new Fake;
  return *fake;
}

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

template <typename T>
void Queue(const T& record) {
  std::lock_guard<std::mutex> lock(F().mu);
  if (!F().force_queue && F().enabled_kinds.count(static_cast<int>(
                              *reinterpret_cast<const CUpti_ActivityKind*>(&record))) == 0) {
    return;  // CUPTI records only enabled kinds
  }
  std::vector<uint8_t> bytes(sizeof(T));
  std::memcpy(bytes.data(), &record, sizeof(T));
  F().queued.push_back(std::move(bytes));
}

// Buffer layout: for each record, an 8-byte size then the record padded to 8 bytes.
size_t Padded(size_t n) { return (n + 7) & ~size_t{7}; }

}  // namespace

FAKE_EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = F().mode == kOldVersion ? 28 : CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_ERROR_NOT_INITIALIZED ? "CUPTI_ERROR_NOT_INITIALIZED" : "FAKE_ERROR";
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                       CUpti_CallbackFunc callback, void*) {
  std::lock_guard<std::mutex> lock(F().mu);
  if (F().mode == kMultipleSubscribers) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  F().callback = callback;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&F());
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  std::lock_guard<std::mutex> lock(F().mu);
  F().callback = nullptr;
  F().enabled_callbacks.clear();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle,
                                            CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(F().mu);
  if (enable) {
    F().enabled_callbacks.insert({domain, static_cast<int>(cbid)});
  } else {
    F().enabled_callbacks.erase({domain, static_cast<int>(cbid)});
  }
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed) {
  std::lock_guard<std::mutex> lock(F().mu);
  F().requested = requested;
  F().completed = completed;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(F().mu);
  F().enabled_kinds.insert(kind);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(F().mu);
  F().enabled_kinds.erase(kind);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) {
  if (F().mode == kSlowFlush) {
    int generation;
    {
      std::lock_guard<std::mutex> lock(F().mu);
      generation = F().generation;
    }
    sleep(3);
    std::lock_guard<std::mutex> lock(F().mu);
    if (F().generation != generation) return CUPTI_SUCCESS;
  }
  std::vector<std::vector<uint8_t>> records;
  CUpti_BuffersCallbackRequestFunc requested;
  CUpti_BuffersCallbackCompleteFunc completed;
  {
    std::lock_guard<std::mutex> lock(F().mu);
    records.swap(F().queued);
    requested = F().requested;
    completed = F().completed;
  }
  if (requested == nullptr || completed == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
  size_t at = 0;
  uint8_t* buffer = nullptr;
  size_t size = 0;
  for (size_t i = 0; i <= records.size(); ++i) {
    const bool last = i == records.size();
    if (buffer != nullptr && (last || at + 8 + Padded(records[i].size()) > size)) {
      completed(nullptr, 0, buffer, size, at);
      buffer = nullptr;
    }
    if (last) break;
    if (buffer == nullptr) {
      size_t max_records = 0;
      requested(&buffer, &size, &max_records);
      at = 0;
      if (buffer == nullptr) return CUPTI_ERROR_UNKNOWN;
    }
    const uint64_t record_size = records[i].size();
    std::memcpy(buffer + at, &record_size, 8);
    std::memcpy(buffer + at + 8, records[i].data(), records[i].size());
    at += 8 + Padded(records[i].size());
  }
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                   CUpti_Activity** record) {
  size_t at;
  if (*record == nullptr) {
    at = 0;
  } else {
    const uint8_t* current = reinterpret_cast<const uint8_t*>(*record);
    uint64_t current_size;
    std::memcpy(&current_size, current - 8, 8);
    at = static_cast<size_t>(current - buffer) + Padded(current_size);
  }
  if (at + 8 > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + at + 8);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  std::lock_guard<std::mutex> lock(F().mu);
  *dropped = F().dropped;
  F().dropped = 0;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityConfigureUnifiedMemoryCounter(
    CUpti_ActivityUnifiedMemoryCounterConfig* config, uint32_t count) {
  std::lock_guard<std::mutex> lock(F().mu);
  if (F().mode == kNoUvm) return CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE;
  if (F().mode == kUvmBeforeInit && !F().uvm_refused_once) {
    F().uvm_refused_once = true;
    return CUPTI_ERROR_NOT_INITIALIZED;
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (F().mode == kNoThrottling &&
        config[i].kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING) {
      return CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED;
    }
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (config[i].enable != 0) {
      F().uvm_configured.insert(config[i].kind);
    } else {
      F().uvm_configured.erase(config[i].kind);
    }
  }
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = Now() + kClockAheadNs;
  return CUPTI_SUCCESS;
}

// ---- control, for the tests ----

FAKE_EXPORT void FakeCuptiReset(int mode) {
  std::lock_guard<std::mutex> lock(F().mu);
  F().mode = mode;
  F().queued.clear();
  F().uvm_configured.clear();
  F().uvm_refused_once = false;
  F().dropped = 0;
  F().force_queue = false;
  F().enabled_kinds.clear();
  F().enabled_callbacks.clear();
  ++F().generation;
}

// Queue records whatever is enabled (as if CUPTI delivered a late buffer).
FAKE_EXPORT void FakeCuptiForceQueue(int force) {
  std::lock_guard<std::mutex> lock(F().mu);
  F().force_queue = force != 0;
}

FAKE_EXPORT uint64_t FakeCuptiClockAheadNs() { return kClockAheadNs; }

FAKE_EXPORT int FakeCuptiKindEnabled(int kind) {
  std::lock_guard<std::mutex> lock(F().mu);
  return F().enabled_kinds.count(kind) != 0;
}

FAKE_EXPORT uint32_t FakeCuptiUvmCountersConfigured() {
  std::lock_guard<std::mutex> lock(F().mu);
  return static_cast<uint32_t>(F().uvm_configured.size());
}

FAKE_EXPORT void FakeCuptiSetDropped(size_t dropped) {
  std::lock_guard<std::mutex> lock(F().mu);
  F().dropped = dropped;
}

// A driver call `cbid` with CUPTI correlation id `correlation_id`, made on the calling thread:
// the subscriber's callback runs at entry and exit when it enabled that cbid.
FAKE_EXPORT void FakeCuptiDriverCall(uint32_t cbid, uint32_t correlation_id) {
  CUpti_CallbackFunc callback;
  {
    std::lock_guard<std::mutex> lock(F().mu);
    if (F().enabled_callbacks.count({CUPTI_CB_DOMAIN_DRIVER_API, static_cast<int>(cbid)}) == 0) {
      return;
    }
    callback = F().callback;
  }
  CUpti_CallbackData data = {};
  data.correlationId = correlation_id;
  data.functionName = "fake";
  for (CUpti_ApiCallbackSite site : {CUPTI_API_ENTER, CUPTI_API_EXIT}) {
    data.callbackSite = site;
    callback(nullptr, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  }
}

// A context was created (the resource-domain callback, when enabled).
FAKE_EXPORT void FakeCuptiContextCreated() {
  CUpti_CallbackFunc callback;
  {
    std::lock_guard<std::mutex> lock(F().mu);
    if (F().enabled_callbacks.count({CUPTI_CB_DOMAIN_RESOURCE,
                                     static_cast<int>(CUPTI_CBID_RESOURCE_CONTEXT_CREATED)}) == 0) {
      return;
    }
    callback = F().callback;
  }
  CUpti_ResourceData data = {};
  callback(nullptr, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &data);
}

FAKE_EXPORT void FakeCuptiQueueKernel(uint32_t correlation_id, uint64_t start, uint64_t end,
                                      uint32_t graph_id, const char* name) {
  CUpti_ActivityKernel10 k = {};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.deviceId = 0;
  k.streamId = 7;
  k.gridX = 4, k.gridY = 2, k.gridZ = 1;
  k.blockX = 128, k.blockY = 1, k.blockZ = 1;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  k.correlationId = correlation_id;
  k.graphId = graph_id;
  k.name = name;
  Queue(k);
}

FAKE_EXPORT void FakeCuptiQueueMemcpy(uint32_t correlation_id, uint64_t start, uint64_t end) {
  CUpti_ActivityMemcpy6 m = {};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = 4096;
  m.start = start;
  m.end = end;
  m.streamId = 9;
  m.correlationId = correlation_id;
  Queue(m);
}

FAKE_EXPORT void FakeCuptiQueueUvm(int counter_kind, uint64_t value, uint64_t start, uint64_t end,
                                   uint64_t address, uint32_t src, uint32_t dst, uint32_t flags) {
  CUpti_ActivityUnifiedMemoryCounter3 u = {};
  u.kind = CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER;
  u.counterKind = static_cast<CUpti_ActivityUnifiedMemoryCounterKind>(counter_kind);
  u.value = value;
  u.start = start;
  u.end = end;
  u.address = address;
  u.srcId = src;
  u.dstId = dst;
  u.flags = flags;
  Queue(u);
}

FAKE_EXPORT void FakeCuptiQueueMemory(int operation, int memory_kind, uint64_t address,
                                      uint64_t bytes, uint64_t timestamp) {
  CUpti_ActivityMemory4 m = {};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = static_cast<CUpti_ActivityMemoryOperationType>(operation);
  m.memoryKind = static_cast<CUpti_ActivityMemoryKind>(memory_kind);
  m.address = address;
  m.bytes = bytes;
  m.timestamp = timestamp;
  Queue(m);
}
