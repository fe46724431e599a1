// What the residency engine keeps per managed allocation it tracks (per 2 MiB chunk for arenas),
// and the share of the budget a range takes: shared by the engine and its collaborators
// (policy/engine/schedule_executor.h), guarded by the engine's lock.
#ifndef SPILLWAY_POLICY_ENGINE_TRACKED_ALLOCATION_H_
#define SPILLWAY_POLICY_ENGINE_TRACKED_ALLOCATION_H_

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

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
  // A schedule moves 2 MiB chunks, the engine's own moves whole allocations: after a schedule's
  // move of a part, an allocation may be partly on the device. It then counts as not resident,
  // with `part_in` the footprint of its chunks still there (counted in the engine's resident
  // bytes) and `absent_chunks` the chunks gone (address / kChunkBytes, sorted). Both are empty
  // unless partly on the device.
  uint64_t part_in = 0;
  std::vector<uint64_t> absent_chunks;
};

// The footprint it has on the device, and the footprint bringing it in whole takes.
inline uint64_t OnDevice(const TrackedAllocation& t) {
  return t.resident ? t.footprint : t.part_in;
}
inline uint64_t Missing(const TrackedAllocation& t) {
  return t.resident ? 0 : t.footprint - t.part_in;
}

// Whether any chunk of [address, address + bytes) of it is on the device.
bool AnyOnDevice(const TrackedAllocation& t, uint64_t address, uint64_t bytes);
// It comes in whole: `resident_bytes` (the engine's count) grows by what was missing.
void MarkResident(TrackedAllocation* t, uint64_t* resident_bytes);
// It leaves whole: `resident_bytes` shrinks by what it had on the device, which is returned.
uint64_t MarkAbsent(TrackedAllocation* t, uint64_t* resident_bytes);
// The part [address, address + bytes) of it comes in (`in`) or leaves: its residency and
// `resident_bytes` follow, chunk by chunk (`granule`: EngineOptions::residency_granule).
void MovePart(TrackedAllocation* t, uint64_t address, uint64_t bytes, bool in, uint64_t granule,
              uint64_t* resident_bytes);

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
