// The residency engine's lookahead streams and batches (policy/engine/lookahead_streams.h).
#include "policy/engine/lookahead_streams.h"

namespace spillway::policy {

bool LookaheadStreams::Ready(Device* device) {
  std::call_once(once_, [this, device] {
    if (device->CreateSideStream(&side_) != kDeviceOk) return;
    if (device->CreateSideStream(&evict_) != kDeviceOk) evict_ = side_;
    for (Event& event : events_) {
      if (device->CreateEvent(&event) != kDeviceOk) return;
    }
    ready_.store(true, std::memory_order_release);
  });
  return ready();
}

uint64_t LookaheadStreams::Poll(Device* device) {
  constexpr uint64_t kRingBatches = kEvents / 2;
  const uint64_t issued = issued_.load(std::memory_order_acquire);
  uint64_t done = polled_.load(std::memory_order_relaxed);
  // A batch whose events were reused since is long done.
  if (issued > done + kRingBatches - 1) done = issued - (kRingBatches - 1);
  for (int query = 0; query < 8 && done < issued; ++query) {
    if (device->QueryEvent(BatchEvent(done + 1, 1)) != kDeviceOk) break;
    ++done;
  }
  polled_.store(done, std::memory_order_relaxed);
  return done;
}

}  // namespace spillway::policy
