// What the simulator and the planner share: a workload's step repeated into one flat sequence of
// events over 2 MiB chunks (with each access's next use and the device bytes each chunk takes),
// and Belady's farthest-next-use replacement over that sequence (and a time-aware variant of it),
// as a log of the loads and evictions it makes.
#ifndef SPILLWAY_POLICY_PLANNER_SIMULATOR_REPLAY_H_
#define SPILLWAY_POLICY_PLANNER_SIMULATOR_REPLAY_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "policy/plan/workload_model.h"

namespace spillway::policy {

inline constexpr uint64_t kNoNextUse = std::numeric_limits<uint64_t>::max();
inline constexpr int kReplaySteps = 3;  // warm-up, measured, look-ahead
inline constexpr uint32_t kMeasuredStep = 1;

struct ReplayItem {
  StepEvent::Kind kind = StepEvent::Kind::kLaunch;
  uint64_t alloc_id = 0;           // kAlloc, kFree
  const Launch* launch = nullptr;  // kLaunch
  uint32_t step = 0;
  uint32_t position = 0;           // launch index in the step (for alloc/free: the next launch's)
  uint64_t global = 0;             // launch index over all steps (likewise)
  std::vector<uint32_t> chunks;    // kLaunch: distinct chunks touched
  std::vector<uint64_t> next_use;  // per chunk: global index of its next use, or kNoNextUse
  // per chunk with no next use: the global index of the launch after its allocation's free (its
  // data is dead until then), or kNoNextUse when the replay does not free it
  std::vector<uint64_t> freed_at;
};

struct Replay {
  std::vector<uint32_t> base;       // first chunk of each allocation, by id (base[0] unused)
  std::vector<uint64_t> owner;      // allocation id of each chunk
  std::vector<uint32_t> footprint;  // device bytes of each chunk when resident (ChunkFootprint)
  uint32_t total_chunks = 0;
  uint32_t launches_per_step = 0;
  std::vector<ReplayItem> items;
};

// REQUIRES: ValidateWorkload(w).ok().
Replay BuildReplay(const Workload& w, int steps = kReplaySteps);

// One decision of Belady's replacement, in the order made.
struct BeladyEvent {
  enum class Kind { kLoad, kEvict, kFree };
  Kind kind = Kind::kLoad;
  uint32_t chunk = 0;
  uint64_t global = 0;  // the launch that needed the load (kLoad, kEvict) or next launch (kFree)
  uint32_t step = 0;
  bool fresh = false;     // kLoad: first touch since allocation (nothing to copy)
  bool dead = false;      // kEvict: never used again before its free (no copy back)
  uint64_t last_use = 0;  // kEvict, kFree: global index of its last use
  bool held = false;      // kEvict: made for room held free at its position (RunBelady's reserve)
  // kLoad: past the budget (the launch needs more than the device holds: nothing was left to
  // evict). kEvict: right after such a launch, down to the budget; the device paged the launch's
  // chunks in and out while it ran, so this one may not be resident.
  bool overcommit = false;
};

struct BeladyRun {
  std::vector<BeladyEvent> events;
  uint64_t overcommit_chunks = 0;  // chunks loaded past the budget (a launch needs more than it)
};

// Belady's replacement over `capacity_bytes` of device memory, each chunk taking its footprint:
// the victim is the resident chunk used farthest in the future (dead ones first), as many as the
// chunk coming in needs room for. With `idle_horizon` > 0, a time-aware variant: among the chunks
// not needed within `idle_horizon` launches, the one unused longest is the victim, so that its copy
// back can be issued early, while the copy engine is idle, instead of right after a chunk the
// kernels just used; it may move more bytes than Belady's (docs/results/planner-simulate.md,
// "Time-aware victims"). With `reserve` (bytes by launch position in the step; empty: none), the
// budget at each position is that many bytes smaller: what is over it goes out before the launch,
// farthest next use first, as evictions marked `held` (the planner's held room, planner.cc).
//
// `dead_weight` says when dead data (a chunk with no use before its allocation's free) is a
// victim. Negative (kDeadFirst): before anything else, as dropping it costs nothing. From 0 on,
// it ranks as if its next use came `dead_weight` times the launches from its last use to its
// free after that last use (0: only when nothing else can go; 1: at its free), for a schedule
// whose executor writes dead data back rather than drop it (the residency engine does: a copy
// the plan does not see may still read it), where keeping it until its free costs no copy.
// REQUIRES: `capacity_bytes` >= kChunkBytes.
inline constexpr double kDeadFirst = -1;
BeladyRun RunBelady(const Replay& r, uint64_t capacity_bytes, uint64_t idle_horizon = 0,
                    const std::vector<uint64_t>& reserve = {}, double dead_weight = kDeadFirst);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLANNER_SIMULATOR_REPLAY_H_
