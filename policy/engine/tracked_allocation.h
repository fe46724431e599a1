// What the residency engine keeps per managed allocation it tracks (per 2 MiB chunk for arenas),
// and the share of the budget a range takes: shared by the engine and its collaborators
// (policy/engine/schedule_executor.h), guarded by the engine's lock.
#ifndef SPILLWAY_POLICY_ENGINE_TRACKED_ALLOCATION_H_
#define SPILLWAY_POLICY_ENGINE_TRACKED_ALLOCATION_H_

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "policy/engine/device.h"

namespace spillway::policy {

struct TrackedAllocation {
  uint64_t base = 0;
  uint64_t size = 0;
  bool resident = false;
  uint64_t used_by_launch = 0;   // the launch stamp of the last launch whose access set had it
  uint64_t pending_batch = 0;    // the lookahead batch that prefetched it, until a launch waits
  uint64_t footprint = 0;        // what it takes of the budget when resident (GranuleFootprint)
  bool on_host = false;          // placed on the host by a rule: never moved, out of budget
  bool launched = false;         // a launch's access set has had it
  Stream last_stream = nullptr;  // the stream of its newest such launch
  uint64_t evict_seq = 0;        // the order event after its newest eviction (0: none)
  Stream evicted_on = nullptr;   // the stream of that eviction
};

// The tracked allocations by id (arena chunks by ArenaPieceId).
using TrackedMap = std::unordered_map<uint64_t, TrackedAllocation>;

// The bytes [base, base + size) takes on the device: the residency granules it spans (`granule`:
// EngineOptions::residency_granule; 0 or 1: bytes).
inline uint64_t GranuleFootprint(uint64_t base, uint64_t size, uint64_t granule) {
  granule = std::max<uint64_t>(granule, 1);
  if (granule == 1 || size == 0) return size;
  const uint64_t first = base / granule, last = (base + size - 1) / granule;
  return (last - first + 1) * granule;
}

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_TRACKED_ALLOCATION_H_
