// The residency engine's executor of planned schedules (policy files,
// policy/plan/planned_policy.h): when the policy's schedule decides a launch, the executor takes
// the schedule's moves, updates the engine's residency from them and plans the device calls that
// execute them, chunk by chunk, ordered by the engine's order events (see schedule_executor.cc);
// the engine issues those calls once its lock is released. Its own state: whether the latest launch
// followed a schedule, the ordering state per allocation (per 2 MiB chunk for arenas, which a
// schedule keeps whole), the offsets pointers into each arena were seen at, and the streams that
// launched while following. Not thread-safe: the engine calls it under its lock; the planned calls
// are per thread.
#ifndef SPILLWAY_POLICY_ENGINE_SCHEDULE_EXECUTOR_H_
#define SPILLWAY_POLICY_ENGINE_SCHEDULE_EXECUTOR_H_

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "policy/engine/access_set.h"
#include "policy/engine/device.h"
#include "policy/engine/eviction_policy.h"
#include "policy/engine/room_ledger.h"
#include "policy/engine/tracked_allocation.h"

namespace spillway::policy {

// One device call of a followed launch, planned under the engine's lock.
struct ScheduleOp {
  enum class Type { kRecord, kWait, kToHost, kToDevice };
  enum class On { kLaunch, kEvict, kSide, kOther };  // kOther: `other`
  Type type;
  On on;
  uint64_t seq = 0;  // kRecord / kWait: the order event
  uint64_t id = 0;   // kToHost / kToDevice: the range moved
  uint64_t address = 0;
  uint64_t bytes = 0;
  Stream other = nullptr;  // On::kOther: the stream
};

class ScheduleExecutor {
 public:
  // The engine's state a plan reads and updates (guarded by the engine's lock).
  struct Residency {
    TrackedMap* tracked;
    uint64_t* resident_bytes;  // of the tracked allocations resident
    RoomLedger* room;
    uint64_t* order_seq;    // the newest order event used (its ring position)
    uint64_t order_events;  // the size of the order event ring
    uint64_t granule;       // EngineOptions::residency_granule
  };

  // @brief Whether the latest launch followed a schedule.
  bool active() const { return active_; }

  // @brief With a policy that has a schedule (`has_schedule`), the chunks of arenas (allocations
  // of at least kArenaMinBytes in `tracked`, reached through an interior pointer) the launch
  // (`access`, `words`) uses, for the policy's view of it and for Plan; notes the offsets its
  // pointers reach. Empty otherwise. Valid until the thread's next call.
  const std::vector<ArenaChunk>& ArenaChunks(const AccessSet& access,
                                             const std::vector<uint64_t>& words,
                                             const TrackedMap& tracked, bool has_schedule);
  // @brief Takes the moves of the policy's schedule (`source`; null: the policy has none) for the
  // launch being planned: false when it does not decide the launch (following ends).
  bool TakeMoves(ScheduleSource* source);
  // @brief After the engine's lock was released and taken again during a launch's planning: what
  // `tracked` no longer has leaves the launch (`ids` and the arena use ArenaChunks found).
  void DropFreed(const TrackedMap& tracked, std::vector<uint64_t>* ids);
  // @brief REQUIRES: ArenaChunks and TakeMoves (true) called for this launch. Updates residency
  // from the schedule's moves for the launch on `stream` (`ids`: its access set) and plans the
  // calls that execute them (PlannedOps): with `order_ready` (the order events exist), evictions
  // on `evict_stream`, prefetches on the side stream; without, all on the launch stream.
  void Plan(const std::vector<uint64_t>& ids, bool order_ready, Stream evict_stream, Stream stream,
            const Residency& residency);
  // @brief The calls the calling thread's latest Plan planned, in order.
  static const std::vector<ScheduleOp>& PlannedOps();

  // @brief Allocation `id` of `size` bytes is gone: its ordering state and offsets are forgotten.
  void Forget(uint64_t id, uint64_t size);
  // @brief The offsets pointers into arena `id` were seen at while kept whole; null when none.
  const std::vector<uint64_t>* SeenOffsets(uint64_t id) const;
  // @brief Arena `id`, tracked per chunk until now, is kept whole from now on; `offsets`: those
  // pointers into it were seen at.
  void KeepOffsets(uint64_t id, std::vector<uint64_t> offsets) {
    offsets_[id] = std::move(offsets);
  }

 private:
  // Per allocation (per chunk for arenas): the event after its newest side-stream prefetch (0:
  // none to wait for) and after its newest eviction, and its newest use.
  struct State {
    uint64_t ready_seq = 0;
    uint64_t evict_seq = 0;
    Stream last_stream = nullptr;  // the stream of its newest use (null: the legacy stream)
    uint64_t last_launch = 0;      // launches_ at its newest use (0: none yet)
  };
  // Notes the offsets `words` reach into each allocation of `access` of at least kArenaMinBytes
  // reached through an interior pointer, and appends to `pieces` the ArenaPieceId of each chunk
  // its pointers name and to `arena_ids` those allocations.
  void ArenaUse(const AccessSet& access, const std::vector<uint64_t>& words,
                const TrackedMap& tracked, std::vector<uint64_t>* arena_ids,
                std::vector<uint64_t>* pieces);
  // Calls `f` with the ordering state of the chunks [address, address + bytes) of `id` (based
  // at `base`) if an arena, of the whole allocation otherwise.
  void ForState(uint64_t id, uint64_t base, uint64_t address, uint64_t bytes,
                absl::FunctionRef<void(State&)> f);
  // Marks what launch `launch` on `stream` uses (`ids`, the arena chunks it names) as used.
  void NoteUse(const std::vector<uint64_t>& ids, const TrackedMap& tracked, Stream stream,
               uint64_t launch);
  // Plans the evictions (after the launch stream and the streams that may still read a victim),
  // each chunk followed by an order event, its room in the ledger.
  void PlanEvictions(Stream evict_stream, Stream stream, const Residency& residency);
  // Plans the incoming chunks (prefetches first, then populates): each after the room it takes.
  void PlanIncoming(const std::vector<uint64_t>& ids, uint64_t earlier_evictions,
                    const Residency& residency);
  // Plans the launch's wait for the newest side-stream prefetch of what it uses.
  void PlanLaunchWait(const std::vector<uint64_t>& ids, const TrackedMap& tracked,
                      const Residency& residency);

  bool active_ = false;          // the latest launch followed a schedule
  uint64_t last_evict_seq_ = 0;  // the event after the newest scheduled eviction
  std::unordered_map<uint64_t, State> state_;
  // For arenas, the same per chunk (by ArenaPieceId), so a launch waits only for the moves of the
  // chunks it uses, and the offsets pointers into each were seen at (sorted, distinct).
  std::unordered_map<uint64_t, State> chunk_state_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> offsets_;
  // Launches seen while following (numbered from 1), and each stream's newest of them: an
  // eviction waits for every stream that launched after its victim's newest use.
  uint64_t launches_ = 0;
  std::vector<std::pair<Stream, uint64_t>> streams_;
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_SCHEDULE_EXECUTOR_H_
