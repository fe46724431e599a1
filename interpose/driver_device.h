// The residency engine's device interface over the real driver: the hooked functions come from
// the shim's table of real functions, the others (prefetch, discard, advise, parameter info) from
// the real cuGetProcAddress, once (streams and events too: the shim does not hook them). Also the
// per-CUfunction cache of parameter layouts.
#ifndef SPILLWAY_INTERPOSE_DRIVER_DEVICE_H_
#define SPILLWAY_INTERPOSE_DRIVER_DEVICE_H_

#include <mutex>
#include <utility>
#include <vector>

#include "interpose/param_layouts.h"
#include "policy/front_door.h"

namespace spillway::interpose {

// REQUIRES (every member): the real driver is resolved and the caller holds a ReentrancyGuard.
class DriverDevice final : public policy::Device {
 public:
  policy::DeviceResult AllocateManaged(uint64_t* address, uint64_t bytes) override;
  policy::DeviceResult AllocateDevice(uint64_t* address, uint64_t bytes) override;
  policy::DeviceResult Free(uint64_t address) override;
  policy::DeviceResult PrefetchToDevice(uint64_t address, uint64_t bytes,
                                        policy::Stream stream) override;
  policy::DeviceResult PrefetchToHost(uint64_t address, uint64_t bytes,
                                      policy::Stream stream) override;
  policy::DeviceResult Discard(uint64_t address, uint64_t bytes, policy::Stream stream) override;
  policy::DeviceResult PlaceOnHost(uint64_t address, uint64_t bytes) override;
  policy::DeviceResult MemoryInfo(uint64_t* free, uint64_t* total) override;
  policy::DeviceResult CreateSideStream(policy::Stream* stream) override;
  policy::DeviceResult CreateEvent(policy::Event* event) override;
  policy::DeviceResult CreateTimingEvent(policy::Event* event) override;
  policy::DeviceResult QueryEvent(policy::Event event) override;
  policy::DeviceResult SynchronizeEvent(policy::Event event) override;
  policy::DeviceResult ElapsedMilliseconds(policy::Event start, policy::Event end,
                                           float* ms) override;
  policy::DeviceResult RecordEvent(policy::Event event, policy::Stream stream) override;
  policy::DeviceResult StreamWaitEvent(policy::Stream stream, policy::Event event) override;

 private:
  // cuMemDiscardBatchAsync refuses the legacy NULL stream (cuda.h: "Must not be legacy NULL
  // stream"), where a cuMemFree's discard or a synchronous memset's or copy's goes. `issue(stream)`
  // is called with `stream` as it is unless that is the legacy stream; then with the current
  // context's stand-in stream, ordered as the legacy stream would order it: after an event
  // recorded on the legacy stream (which, as every legacy-stream operation, waits for the blocking
  // streams' earlier work) and before the legacy stream's next work (which waits for an event
  // recorded after the call, or, if that cannot be arranged, the stand-in is synchronized). The
  // events are the calling thread's own.
  template <typename Issue>
  policy::DeviceResult OnLegacyStandIn(policy::Stream stream, Issue issue);
  // `context`'s stand-in stream (a CUcontext; a non-blocking CUstream, null when none could be
  // made), made at its first need, and again after an end of that context (ContextEnds): a
  // primary context keeps its handle across a reset, and a new context may get an ended one's.
  // No driver call under the lock.
  void* StandInFor(void* context);
  struct StandIn {
    void* context;
    uint64_t context_ends;  // ContextEnds(context) when made
    void* stream;
  };

  // A std::mutex, not an absl::Mutex: Debian's Abseil is not built for ThreadSanitizer, which
  // could not see what this lock orders (scripts/tsan.supp).
  std::mutex stand_ins_mutex_;
  std::vector<StandIn> stand_ins_;  // guarded by the mutex
};

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_DRIVER_DEVICE_H_
