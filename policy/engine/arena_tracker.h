// The residency engine's arena tracker: a large allocation reached through interior pointers (an
// arena, a caching allocator's segment) is tracked per 2 MiB chunk from then on, so a launch moves
// only the chunks its pointers name (policy/engine/arena_chunks.h). Its own state is the arenas
// split and the offsets pointers into each were seen at; it splits and merges the engine's tracked
// entries and tells the policy (Split, Touch, Forget, Merged). Not thread-safe: the engine calls
// it under its lock.
#ifndef SPILLWAY_POLICY_ENGINE_ARENA_TRACKER_H_
#define SPILLWAY_POLICY_ENGINE_ARENA_TRACKER_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "absl/functional/function_ref.h"
#include "policy/engine/access_set.h"
#include "policy/engine/eviction_policy.h"
#include "policy/engine/schedule_executor.h"
#include "policy/engine/tracked_allocation.h"

namespace spillway::policy {

class ArenaTracker {
 public:
  // The engine's state the tracker reads and updates (guarded by the engine's lock).
  struct Residency {
    TrackedMap* tracked;
    uint64_t* resident_bytes;  // of the tracked allocations resident
    EvictionPolicy* policy;
    ScheduleExecutor* schedule;  // keeps the offsets seen while arenas stay whole
    uint64_t granule;            // EngineOptions::residency_granule
  };

  // @brief The ids of what the launch (`access`, `words`) touches (tracked allocations, and for
  // arenas the chunks its pointers name), distinct, in parameter order, with their sizes. Splits
  // an allocation of at least kArenaMinBytes reached through an interior pointer; with a policy
  // that keeps arenas whole (ArenasWhole), splits none and merges those split.
  void ExpandAccess(const AccessSet& access, const std::vector<uint64_t>& words,
                    const Residency& residency, std::vector<uint64_t>* ids,
                    std::vector<uint64_t>* sizes);
  // @brief [from, to) inside `allocation`: calls `visit` with each entry of `tracked` for
  // `allocation` (it whole, or its chunks if an arena) that overlaps [from, to), and its id.
  void ForEachTouched(const Allocation& allocation, uint64_t from, uint64_t to, TrackedMap& tracked,
                      absl::FunctionRef<void(TrackedAllocation&, uint64_t)> visit) const;
  // @brief Forgets the chunks of arena `id` (freed), if it is one; false when it is not.
  bool Forget(uint64_t id, const Residency& residency);

 private:
  struct Arena {
    uint64_t base = 0;
    uint64_t size = 0;
    std::vector<uint64_t> offsets;  // the offsets pointers into it were seen at, sorted, distinct
  };

  // `id` tracked: replaces it by its chunks (same residency).
  Arena& Split(uint64_t id, const Residency& residency);
  // Tracks every arena whole again: resident when any chunk is, its use stamps the newest of its
  // chunks'; the offsets pointers into it were seen at carry over to the schedule executor's.
  void MergeAll(const Residency& residency);

  std::unordered_map<uint64_t, Arena> arenas_;  // by allocation id
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_ARENA_TRACKER_H_
