// Closes a one-step schedule over its own repetition. The planner folds Belady's decisions over
// the replayed steps onto one step's launch positions, and the engine follows that step over and
// over. Belady's run is not periodic, so the folded step need not leave the device as it found it:
// a chunk resident at the step's start may be evicted and never brought back (the next step's use
// then faults it in, where the engine does not count it, and the device overfills), or a chunk
// loaded and kept may be loaded again while still resident (its room counted free when it is
// not). CloseSchedule follows the folded step round and round, chunk by chunk, and mends it so
// that every chunk is resident at each use, never loaded while resident and never evicted while
// absent, with the device's residency at every launch kept within the budget where room allows.
#ifndef SPILLWAY_POLICY_PLANNER_SCHEDULE_CLOSURE_H_
#define SPILLWAY_POLICY_PLANNER_SCHEDULE_CLOSURE_H_

#include <cstdint>
#include <vector>

#include "policy/planner/simulator_replay.h"

namespace spillway::policy {

enum class ChunkMoveKind : uint8_t { kEvict, kEvictAbsent, kDiscard, kPrefetch, kPopulate };

struct ChunkMove {
  ChunkMoveKind kind = ChunkMoveKind::kEvict;
  uint32_t chunk = 0;
};

// A step's moves by launch position (before that launch), each position's in issue order.
using FoldedSchedule = std::vector<std::vector<ChunkMove>>;

struct ClosureStats {
  uint64_t loads_added = 0;               // a chunk used where the step had left it absent
  uint64_t evictions_dropped = 0;         // such a chunk kept instead: room for it all along
  uint64_t evictions_added = 0;           // a chunk loaded where the step had left it resident
  uint64_t loads_dropped = 0;             // a load with no use before the next load or eviction
  uint64_t absent_evictions_dropped = 0;  // an eviction of a chunk already gone
  uint64_t loads_delayed = 0;             // a load moved after a launch the device was too full at
  // Launch positions where the closed step's residency is over the capacity still (a use with
  // no room before it).
  uint64_t over_capacity_positions = 0;

  uint64_t changes() const {
    return loads_added + evictions_dropped + evictions_added + loads_dropped +
           absent_evictions_dropped + loads_delayed;
  }
};

// Mends `schedule` (r.launches_per_step positions, folded from the replay's measured step) as
// described above. `budget` is the device bytes at each position that added residency may use
// (`capacity` less room held free there); `excluded` marks chunks left as they are (those a
// launch larger than the device pages in and out). A chunk is evicted no sooner than `guard`
// launches after its last use where the next load leaves time for it. Loads added go as early as
// the room the closed step leaves free allows; an eviction whose chunk is needed again and has
// room all the way is dropped. Where the step still holds more than `capacity` at a launch, a
// load made by then whose chunk goes out again unused is dropped (with that eviction), else the
// loads of chunks that launch does not use yet go after it, the one used last first.
// REQUIRES: r was built with at least kMeasuredStep + 1 steps; budget.size() and
// schedule->size() equal r.launches_per_step; excluded.size() equals r.total_chunks.
ClosureStats CloseSchedule(const Replay& r, uint64_t capacity, const std::vector<uint64_t>& budget,
                           const std::vector<char>& excluded, uint64_t guard,
                           FoldedSchedule* schedule);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLANNER_SCHEDULE_CLOSURE_H_
