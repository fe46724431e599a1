// The residency engine's host placement (a policy file's `host` rules,
// policy/plan/planned_policy.h): an allocation the policy places on the host is advised to stay
// there with the device mapping it (kernels read and write it over the link), once, outside the
// engine's lock; from then on it is never prefetched or evicted and takes nothing of the budget, as
// the simulator prices it (policy/planner/simulator.cc, SimulatePlanned). One already on the device
// is written back first; the room that frees is in the room ledger with the order event recorded
// after the write-back, so a prefetch taking it waits for it. A placement the device refuses is
// handed back to the policy, which moves it as `swap`.
#include <vector>

#include "policy/engine/residency_engine.h"

namespace spillway::policy {
namespace {

// A placement planned under the engine's lock.
struct HostPlacement {
  uint64_t id;
  uint64_t base;
  uint64_t size;
  bool write_back;      // resident on the device: written back to the host after the advice
  uint64_t wait_batch;  // the lookahead batch that prefetched it and no launch waited for (0: none)
  uint64_t seq;         // the order event after the write-back (its room's, in the ledger); 0: none
};

// Reused per thread, so a warm launch path does not allocate.
thread_local std::vector<uint64_t> t_host_ids;
thread_local std::vector<HostPlacement> t_host_placements;

}  // namespace

bool ResidencyEngine::PlanHostPlacements(Stream stream) {
  std::vector<HostPlacement>& placements = t_host_placements;
  placements.clear();
  if (schedule_source_ != nullptr) {
    schedule_source_->TakeHostPlacements(&t_host_ids);
  } else {
    t_host_ids.clear();
  }
  for (const uint64_t id : t_host_ids) {
    const auto it = tracked_.find(id);
    if (it == tracked_.end() || it->second.on_host) continue;
    Tracked& tracked = it->second;
    tracked.on_host = true;
    const bool write_back = OnDevice(tracked) != 0;
    uint64_t seq = 0;
    if (write_back) {
      const uint64_t freed = MarkAbsent(&tracked, &resident_bytes_);
      seq = NextOrderEvent();
      if (seq != 0) room_.Add(seq, stream, freed);
    }
    placements.push_back(
        HostPlacement{id, tracked.base, tracked.size, write_back, tracked.pending_batch, seq});
    tracked.pending_batch = 0;
  }
  return !placements.empty();
}

void ResidencyEngine::IssueHostPlacements(Stream stream) {
  for (const HostPlacement& p : t_host_placements) {
    const DeviceResult result = device_->PlaceOnHost(p.base, p.size);
    if (result != kDeviceOk) {
      std::lock_guard lock(mutex_);
      const auto it = tracked_.find(p.id);
      if (it != tracked_.end()) {  // not freed meanwhile: moved as any other from now on
        it->second.on_host = false;
        schedule_source_->HostPlacementFailed(p.id, result);  // it placed p
      }
    }
    if (!p.write_back) continue;
    // Not counted resident any more: on the host it goes (after a lookahead prefetch still queued).
    if (p.wait_batch != 0 && lookahead_.ready()) {
      device_->StreamWaitEvent(stream, lookahead_.BatchEvent(p.wait_batch, 1));
    }
    if (device_->PrefetchToHost(p.base, p.size, stream) == kDeviceOk) {
      evict_bytes_.fetch_add(p.size, std::memory_order_relaxed);
    }
    // Its room is free once this has run (recorded even after a failure: the wait then orders
    // nothing more than the device's own eviction would need).
    if (p.seq != 0) RecordOrderEvent(p.seq, stream);
  }
  t_host_placements.clear();
}

}  // namespace spillway::policy
