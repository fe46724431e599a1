// An in-process fake of the engine's device interface: hands out addresses, records every call
// in order (streams and events included), and can be told to fail discards and host placements.
// Timing events read a clock the test sets (plus, per stream, the time its prefetches took at
// `h2d_bytes_per_ms`), and complete only while `events_complete` is true. AllocateManaged makes a
// managed allocation the engine knows. Every call made while the calling thread holds an engine's
// lock fails the test (the engine promises no lock across a device call) and is counted.
#ifndef SPILLWAY_TESTS_POLICY_FAKE_DEVICE_H_
#define SPILLWAY_TESTS_POLICY_FAKE_DEVICE_H_

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "policy/engine/allocation_registry.h"
#include "policy/engine/device.h"
#include "policy/engine/engine_mutex.h"
#include "policy/engine/residency_engine.h"

namespace spillway::policy::testing {

struct DeviceCall {
  // "managed", "device", "free", "to_device", "to_host", "discard", "stream", "event",
  // "record" (event recorded on stream), "wait" (stream waits for event), "populate"
  // (discard and prefetch to the device), "host" (placed on the host, mapped remotely), "sync"
  // (the host waited for event)
  std::string what;
  uint64_t address = 0;
  uint64_t bytes = 0;
  Stream stream = nullptr;
  Event event = nullptr;
};

class FakeDevice final : public Device {
 public:
  DeviceResult AllocateManaged(uint64_t* address, uint64_t bytes) override {
    return Allocate("managed", address, bytes);
  }
  DeviceResult AllocateDevice(uint64_t* address, uint64_t bytes) override {
    return Allocate("device", address, bytes);
  }
  DeviceResult Free(uint64_t address) override { return Record("free", address, 0, nullptr); }
  DeviceResult PrefetchToDevice(uint64_t address, uint64_t bytes, Stream stream) override {
    if (h2d_bytes_per_ms > 0) stream_ms[stream] += static_cast<double>(bytes) / h2d_bytes_per_ms;
    return Record("to_device", address, bytes, stream);
  }
  DeviceResult PrefetchToHost(uint64_t address, uint64_t bytes, Stream stream) override {
    return Record("to_host", address, bytes, stream);
  }
  DeviceResult Discard(uint64_t address, uint64_t bytes, Stream stream) override {
    Record("discard", address, bytes, stream);
    return discard_result;
  }
  DeviceResult PlaceOnHost(uint64_t address, uint64_t bytes) override {
    Record("host", address, bytes, nullptr);
    return fail_place_on_host ? 801 /* CUDA_ERROR_NOT_SUPPORTED */ : kDeviceOk;
  }
  DeviceResult MemoryInfo(uint64_t* free, uint64_t* total) override {
    CheckNoEngineLock("memory_info");
    ++memory_infos;
    *total = capacity;
    *free = std::min(capacity, free_bytes);
    return kDeviceOk;
  }
  DeviceResult CreateSideStream(Stream* stream) override {
    *stream = reinterpret_cast<Stream>(next_handle_++);
    return Record("stream", 0, 0, *stream);
  }
  DeviceResult CreateEvent(Event* event) override {
    CheckNoEngineLock("event");
    *event = reinterpret_cast<Event>(next_handle_++);
    DeviceCall& call = calls.emplace_back(DeviceCall{"event", 0, 0, nullptr});
    call.event = *event;
    return kDeviceOk;
  }
  DeviceResult CreateTimingEvent(Event* event) override {
    CheckNoEngineLock("timing_event");
    if (!can_time) return 801;  // CUDA_ERROR_NOT_SUPPORTED
    *event = reinterpret_cast<Event>(next_handle_++);
    recorded_ms_[*event] = -1;
    DeviceCall& call = calls.emplace_back(DeviceCall{"timing_event", 0, 0, nullptr});
    call.event = *event;
    return kDeviceOk;
  }
  DeviceResult QueryEvent(Event /*event*/) override {
    CheckNoEngineLock("query");
    ++queries;
    return events_complete ? kDeviceOk : kDeviceNotReady;
  }
  DeviceResult SynchronizeEvent(Event event) override {
    CheckNoEngineLock("sync");
    calls.push_back(DeviceCall{"sync", 0, 0, nullptr});
    calls.back().event = event;
    return kDeviceOk;
  }
  DeviceResult ElapsedMilliseconds(Event start, Event end, float* ms) override {
    CheckNoEngineLock("elapsed");
    ++elapsed_reads;
    if (!events_complete) return kDeviceNotReady;
    const auto a = recorded_ms_.find(start), b = recorded_ms_.find(end);
    if (a == recorded_ms_.end() || b == recorded_ms_.end() || a->second < 0 || b->second < 0) {
      return 400;  // CUDA_ERROR_INVALID_HANDLE: not a timing event, or never recorded
    }
    *ms = static_cast<float>(b->second - a->second);
    return kDeviceOk;
  }
  DeviceResult RecordEvent(Event event, Stream stream) override {
    CheckNoEngineLock("record");
    calls.push_back(DeviceCall{"record", 0, 0, stream, event});
    const auto timing = recorded_ms_.find(event);
    if (timing != recorded_ms_.end()) timing->second = clock_ms + stream_ms[stream];
    return kDeviceOk;
  }
  DeviceResult StreamWaitEvent(Stream stream, Event event) override {
    CheckNoEngineLock("wait");
    calls.push_back(DeviceCall{"wait", 0, 0, stream, event});
    return kDeviceOk;
  }

  // Calls of kind `what`, in order.
  std::vector<DeviceCall> Calls(const std::string& what) const {
    std::vector<DeviceCall> out;
    for (const DeviceCall& call : calls) {
      if (call.what == what) out.push_back(call);
    }
    return out;
  }

  std::vector<DeviceCall> calls;
  uint64_t capacity = 1ull << 30;
  uint64_t free_bytes = UINT64_MAX;         // what MemoryInfo says is free (at most the capacity)
  DeviceResult discard_result = kDeviceOk;  // when not kDeviceOk, what every discard returns
  bool fail_place_on_host = false;
  // Timing: what a timing event recorded on stream s reads is clock_ms + stream_ms[s].
  bool can_time = true;
  bool events_complete = true;
  double clock_ms = 0;
  double h2d_bytes_per_ms = 0;  // 0: prefetches take no time
  std::map<Stream, double> stream_ms;
  int queries = 0;
  int elapsed_reads = 0;
  int memory_infos = 0;
  int calls_under_engine_lock = 0;  // device calls made while an engine's lock was held

 private:
  DeviceResult Allocate(const char* what, uint64_t* address, uint64_t bytes) {
    *address = next_;
    next_ += (bytes + 0xfff) & ~uint64_t{0xfff};
    return Record(what, *address, bytes, nullptr);
  }
  DeviceResult Record(const char* what, uint64_t address, uint64_t bytes, Stream stream) {
    CheckNoEngineLock(what);
    calls.push_back(DeviceCall{what, address, bytes, stream});
    return kDeviceOk;
  }
  void CheckNoEngineLock(const char* what) {
    if (!EngineMutex::HeldByThisThread()) return;
    ++calls_under_engine_lock;
    ADD_FAILURE() << "device call \"" << what << "\" made under the residency engine's lock";
  }
  std::map<Event, double> recorded_ms_;  // timing events: the time of the last record (-1: none)
  uint64_t next_ = 0x7f0000000000;
  uintptr_t next_handle_ = 0x1000;
};

// A managed allocation of `bytes` on `device`, in `registry` and known to `engine`.
inline Allocation AllocateManaged(FakeDevice& device, AllocationRegistry& registry,
                                  ResidencyEngine& engine, uint64_t bytes) {
  uint64_t address = 0;
  device.AllocateManaged(&address, bytes);
  const Allocation allocation = registry.Insert(address, bytes, Backing::kManaged, false, true);
  engine.OnAllocated(allocation);
  return allocation;
}

}  // namespace spillway::policy::testing

#endif  // SPILLWAY_TESTS_POLICY_FAKE_DEVICE_H_
