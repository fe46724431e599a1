// The residency engine: keeps the managed allocations a launch touches on the device within a
// byte budget. On each launch it marks the access set used, evicts the least useful other
// allocations to the host when the access set plus what is resident would exceed the budget, and
// prefetches the access set to the device, all on the launch stream (an eviction runs after the
// victim's last use there, a prefetch before the kernel). When the policy predicts the next
// launches (a detected training step), it also prefetches their access sets ahead, on side
// streams: evictions on an evict stream that first waits for an event recorded on the launch
// stream and on the stream of each victim's last use, prefetches on a prefetch stream, evicting
// only allocations needed later than what comes in and leaving room for the allocations the next
// launches will make; the launch needing the data waits for an event recorded after its prefetch.
// Room counts as free when a discard or an eviction is planned, but is free on the device only
// once that work has run on its stream: every discard and eviction is followed by an event there,
// kept with its room in a RoomLedger (oldest first), and every prefetch waits for the events of
// the room it takes. Large allocations reached through interior pointers
// (arenas) are tracked per 2 MiB chunk. Frees of managed memory are discarded first, so dead data
// never moves. See docs/engine.md.
//
// Thread-safe. Decisions are made under the engine's lock; device calls are made after it is
// released (never a lock across a driver call).
#ifndef SPILLWAY_POLICY_ENGINE_RESIDENCY_ENGINE_H_
#define SPILLWAY_POLICY_ENGINE_RESIDENCY_ENGINE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "policy/engine/access_set.h"
#include "policy/engine/allocation_registry.h"
#include "policy/engine/arena_chunks.h"
#include "policy/engine/arena_tracker.h"
#include "policy/engine/device.h"
#include "policy/engine/engine_mutex.h"
#include "policy/engine/eviction_policy.h"
#include "policy/engine/launch_timer.h"
#include "policy/engine/lookahead_sizer.h"
#include "policy/engine/lookahead_streams.h"
#include "policy/engine/room_ledger.h"
#include "policy/engine/schedule_executor.h"
#include "policy/engine/tracked_allocation.h"

namespace spillway::policy {

struct PlannedMove;  // residency_engine.cc
struct OrderWait;    // residency_engine.cc
struct LastUse;      // residency_engine.cc

struct EngineOptions {
  // How many launches ahead the access sets are prefetched on the side stream (when the policy
  // predicts them); 0: no lookahead, every move on the launch stream just before the kernel.
  int lookahead_launches = 4;
  // The device's residency granule: a managed allocation counts against the budget as the whole
  // granules it spans. The library uses kPieceBytes (nvidia-uvm and simgpu back a range with 2 MiB
  // chunks where it fills a block, 64 KiB and 4 KiB ones elsewhere: whole 4 KiB pages in all), as
  // does the planner's simulator. 1: bytes.
  uint64_t residency_granule = 1;
  // Size the lookahead from observed times (LookaheadSizer: kernel times and bandwidth measured
  // with timing events) instead of a fixed count; lookahead_launches is then the most launches
  // ahead it may reach.
  bool size_lookahead_from_time = false;
};

class ResidencyEngine {
 public:
  // REQUIRES: `device` outlives the engine.
  ResidencyEngine(Device* device, std::unique_ptr<EvictionPolicy> policy, uint64_t budget_bytes,
                  EngineOptions options = {});
  ResidencyEngine(const ResidencyEngine&) = delete;
  ResidencyEngine& operator=(const ResidencyEngine&) = delete;

  // @brief A new live allocation. Managed ones become candidates for moves (not resident yet);
  // the others take a fixed share of the budget. A policy file's host rules it triggers are
  // carried out now, on the legacy stream, unless `place_now` is false: then at the next launch,
  // on its stream.
  void OnAllocated(const Allocation& allocation, bool place_now = true);

  // @brief `allocation` is about to be freed: forgets it and, if managed and DiscardsFrees(),
  // discards its contents on `stream`. Returns the number of device calls that failed (0 or 1).
  int OnFree(const Allocation& allocation, Stream stream);
  // @brief Whether OnFree discards: once something has had to leave the device. Until then the
  // job fits in the budget, dead data is never copied back, and a free costs no driver call.
  bool DiscardsFrees() const { return moves_ && moving_.load(std::memory_order_relaxed); }

  // @brief `allocation` is gone already (freed by the job through a path the engine does not
  // front): forgets it, no device call.
  void Forget(const Allocation& allocation);

  // @brief A kernel that may touch `access` is about to be launched on `stream`. Evicts and
  // prefetches as described above. `function` (the CUfunction, 0 when unknown) lets the policy
  // tell kernels apart. Returns the number of device calls that failed.
  int OnLaunch(const AccessSet& access, Stream stream, uint64_t function = 0);
  // @brief As above, with the launch's candidate pointer words (from the Resolve* functions of
  // access_set.h). An allocation of at least kArenaMinBytes that a launch reaches through an
  // interior pointer is an *arena* (a caching allocator's segment that tensors are carved from):
  // from then on it is tracked per 2 MiB chunk, and a pointer into it names the chunks from the
  // pointer up to the next offset into the arena seen so far (or its end), so only those move.
  // ArenaTracker (policy/engine/arena_tracker.h).
  int OnLaunch(const AccessSet& access, const std::vector<uint64_t>& words, Stream stream,
               uint64_t function = 0);
  static constexpr uint64_t kArenaChunkBytes = policy::kArenaChunkBytes;
  static constexpr uint64_t kArenaMinBytes = policy::kArenaMinBytes;

  // @brief A memset on `stream` is about to write every byte of [address, address + bytes) of
  // `allocation`. The whole 2 MiB chunks of that range the engine has not made resident hold dead
  // data from then on: they are discarded on `stream`, so they come in zeroed, without the old
  // contents copied. What the engine tracks and the memset would fault in whole (the allocation,
  // or an arena's chunks, every 2 MiB chunk of it touched by the range) is then brought in on
  // `stream` as for a launch, room made by eviction first, so the memset faults nothing in behind
  // the engine's back (not while a schedule is followed). Nothing is done for a range not inside a
  // managed allocation, with the `none` policy, or for chunks on the device or placed on the host;
  // no discard once the device said it cannot discard (not counted as a failure).
  // residency_engine_overwrite.cc. Returns the number of device calls that failed.
  int OnOverwrite(const Allocation& allocation, uint64_t address, uint64_t bytes, Stream stream);

  std::string_view policy_name() const { return policy_->name(); }
  uint64_t budget_bytes() const { return budget_bytes_; }
  uint64_t prefetch_bytes() const { return prefetch_bytes_.load(std::memory_order_relaxed); }
  // Of prefetch_bytes, those prefetched ahead on the side stream.
  uint64_t lookahead_prefetch_bytes() const {
    return lookahead_bytes_.load(std::memory_order_relaxed);
  }
  uint64_t evict_bytes() const { return evict_bytes_.load(std::memory_order_relaxed); }
  uint64_t discard_bytes() const { return discard_bytes_.load(std::memory_order_relaxed); }
  // Bytes discarded by OnOverwrite (not in discard_bytes).
  uint64_t overwrite_discard_bytes() const {
    return overwrite_discard_bytes_.load(std::memory_order_relaxed);
  }
  // The lookahead window chosen at the latest planned batch, in launches (the fixed count when the
  // lookahead is not sized from time), and the bandwidth the sizing uses (bytes per second).
  uint64_t lookahead_window() const { return lookahead_window_.load(std::memory_order_relaxed); }
  double lookahead_bytes_per_second() const;
  // Launches the policy predicted correctly, and the step length it detected (0: none).
  uint64_t predicted_launches() const;
  uint64_t step_length() const;
  uint64_t thread_steps() const;        // StepPredictor::thread_steps
  uint64_t reordered_launches() const;  // StepPredictor::reordered_launches
  // Bytes the engine believes are on the device: resident managed + fixed (device) allocations.
  uint64_t resident_estimate() const;
  // How closely the run followed a policy file (a copy); false when the policy has none.
  bool adherence(ScheduleAdherence* out) const;

 private:
  using Tracked = TrackedAllocation;

  // REQUIRES: mutex_ held. The engine's state the arena tracker works on.
  ArenaTracker::Residency ArenaView() {
    return ArenaTracker::Residency{&tracked_, &resident_bytes_, policy_.get(), &schedule_,
                                   options_.residency_granule};
  }

  static bool Evictable(const void* context, uint64_t id);
  // The bytes [base, base + size) takes on the device: the residency granules it spans.
  uint64_t Footprint(uint64_t base, uint64_t size) const;
  // REQUIRES: mutex_ held. Plans the lookahead moves after launch `stamp`; returns the batch
  // (0 when there is nothing to move).
  // `access_bytes`: the footprint of the launch's own access set.
  // How far ahead (launches) the lookahead makes room by eviction when sized from time.
  uint64_t EvictAhead() const;
  uint64_t PlanLookahead(uint64_t stamp, Stream stream, uint64_t access_bytes,
                         std::vector<PlannedMove>* side_moves);
  // Creates the lookahead's side streams and events once (LookaheadStreams::Ready); false when
  // there is no lookahead or the device cannot.
  bool SideStreamReady();
  // Issues a lookahead batch's `moves` (planned at a launch, after which its first event was
  // recorded on its stream): evictions on the evict stream once the launch stream's earlier work
  // and the victims' last uses elsewhere are done, each followed by its order event; prefetches on
  // the side stream, each after the order events of the room it takes (both planned by
  // PlanLookahead into thread-local lists). Returns the failures.
  int IssueLookahead(const std::vector<PlannedMove>& moves, uint64_t batch);
  // REQUIRES: mutex_ held. Prefetches, on `stream`, those of `ids` that are neither resident nor
  // placed on the host and fit beside what is resident (evicting nothing), each after the room it
  // takes (`own_room` first: room this launch's own evictions made; `waits`). Returns their bytes.
  uint64_t LoadWhatFits(const std::vector<uint64_t>& ids, Stream stream, uint64_t* own_room,
                        std::vector<PlannedMove>* moves, std::vector<OrderWait>* waits);
  // REQUIRES: mutex_ held. The moves a launch (or a memset) on `stream` makes itself: evicts on
  // `stream`, after the victims' last uses elsewhere, until `needed` more bytes fit beside what
  // stays (victims as the policy picks them, none that launch `stamp` used nor any of `keep`,
  // sorted, when given), then brings in each
  // of `ids` not on the device that the policy lets in and the budget has room for
  // (LoadWhatFits). Appends to `moves`, `last_uses` and `waits` (for Issue).
  void PlanOwnMoves(const std::vector<uint64_t>& ids, uint64_t needed, uint64_t stamp,
                    Stream stream, std::vector<PlannedMove>* moves, std::vector<LastUse>* last_uses,
                    std::vector<OrderWait>* waits, const std::vector<uint64_t>* keep = nullptr);
  // REQUIRES: mutex_ held. Frees `tracked` (to be written back on `on`, order event `seq`
  // recorded after it; 0: none): its room goes into the ledger.
  void PlanEviction(Tracked* tracked, uint64_t seq, Stream on);
  // REQUIRES: mutex_ held. When `tracked` was last used on a stream other than `stream` (where
  // its eviction will follow what is issued so far), appends an order event to record there, for
  // the evicting stream to wait for, once per stream.
  void NoteLastUse(const Tracked& tracked, Stream stream, std::vector<LastUse>* last_uses);
  // REQUIRES: mutex_ held. Takes room for `tracked` coming in on `on`: appends to `waits` the
  // order events (not on `on` itself, not waited for there yet) that free it, oldest room first,
  // and the event after its own newest eviction. `own_room`: bytes this launch's own evictions on
  // `on` freed that are not taken yet (taken first: no wait). `on_side`: `on` is the lookahead's
  // side stream (the caller knows; lookahead_.side() itself is published to other threads only
  // by lookahead_.ready()).
  void TakeRoom(const Tracked& tracked, Stream on, bool on_side, uint64_t* own_room,
                std::vector<uint64_t>* waits);
  // REQUIRES: mutex_ held. The policy's schedule adherence; null without a schedule.
  const ScheduleAdherence* Adherence() const {
    return schedule_source_ != nullptr ? schedule_source_->adherence() : nullptr;
  }
  // REQUIRES: mutex_ held. A new order event (its ring position); 0 when they do not exist yet.
  uint64_t NextOrderEvent();
  // REQUIRES: mutex_ held. How many launches ahead of launch `stamp` data has to start moving:
  // with the lookahead sized from time, the window LookaheadSizer gives for the bytes the
  // predicted allocations `next` (nearest first) still need; else options_.lookahead_launches.
  uint64_t SizeLookahead(uint64_t stamp, const std::vector<uint64_t>& next);
  // Issues `moves` on `stream`, counting bytes: first, for each of `last_uses`, its event recorded
  // on its stream and waited for on `stream`; before each move the waits of `waits` for it; after
  // a move with an order event, that event. Returns the failures.
  int Issue(const std::vector<PlannedMove>& moves, Stream stream, bool ahead,
            const std::vector<LastUse>& last_uses, const std::vector<OrderWait>& waits);
  // REQUIRES: mutex_ held. Forgets `allocation`; returns the bytes of the budget that frees.
  uint64_t ForgetLocked(const Allocation& allocation);
  // REQUIRES: `lock` holds mutex_, the schedule executor took moves for this launch. When
  // following begins at this launch, trims the room ledger to the device's free memory, asked
  // with the lock released (never a lock across a driver call); what was freed meanwhile leaves
  // `ids`. residency_engine_schedule.cc.
  void TrimRoomIfFollowingBegins(std::unique_lock<EngineMutex>& lock, std::vector<uint64_t>* ids);
  // Issues the calls the schedule executor planned for this thread's launch (before the kernel
  // on `stream`); returns the failures. residency_engine_schedule.cc.
  int IssueScheduled(Stream stream);
  // REQUIRES: mutex_ held. Takes the policy's new host placements (ScheduleSource::
  // TakeHostPlacements) and plans them: each leaves the budget for good, a resident one to be
  // written back on `stream` (its room in the ledger, freed by an order event recorded after the
  // write-back). False when there are none. residency_engine_host.cc.
  bool PlanHostPlacements(Stream stream);
  // Places what PlanHostPlacements planned on the host (Device::PlaceOnHost; write-backs on
  // `stream`, after any lookahead prefetch of them); a refusal is handed back to the policy, and
  // that allocation is moved as any other from then on. No lock held.
  void IssueHostPlacements(Stream stream);
  // The order events (the room ledger's and the schedule's), created once outside the lock;
  // false when the device cannot.
  bool OrderEventsReady();
  static constexpr size_t kOrderEvents = 8192;
  Event OrderEvent(uint64_t seq) const { return order_events_[seq % kOrderEvents]; }
  // Records order event `seq` on `stream`. The room ledger and the schedule take an order event
  // half the ring older than the newest as complete (RoomLedger::Trim, and a launch's wait for a
  // prefetch); that holds only while the host is not further ahead of the device, so the host
  // first waits for that event where it has not completed (as the driver makes a host wait when a
  // stream's queue is full). No lock held.
  DeviceResult RecordOrderEvent(uint64_t seq, Stream stream);
  Device* const device_;
  const uint64_t budget_bytes_;
  const EngineOptions options_;
  const bool moves_;  // the policy's MovesData(): false, the engine makes no device call
  mutable EngineMutex mutex_;
  std::unique_ptr<EvictionPolicy> policy_;  // guarded by mutex_
  // policy_'s capabilities (null: it has none), used as policy_ is.
  StepPredictor* const predictor_;
  TimeObserver* const time_observer_;
  ScheduleSource* const schedule_source_;
  std::unordered_map<uint64_t, Tracked> tracked_;  // managed allocations by id; guarded by mutex_
  ArenaTracker arenas_;                            // guarded by mutex_
  uint64_t resident_bytes_ = 0;                    // guarded by mutex_
  uint64_t fixed_bytes_ = 0;                       // guarded by mutex_
  uint64_t launch_stamp_ = 0;                      // guarded by mutex_
  // The lookahead's side streams and batches (their counts guarded by mutex_, see its header).
  LookaheadStreams lookahead_;
  // Order events used (a ring: OrderEvent); guarded by mutex_.
  uint64_t order_seq_ = 0;
  // Room counted free whose discard or eviction may not have run yet; guarded by mutex_.
  RoomLedger room_;
  // The newest order event the side stream waited for, per stream it was recorded on (waits for
  // older ones there are implied); guarded by mutex_.
  std::vector<std::pair<Stream, uint64_t>> side_waited_;
  std::once_flag order_once_;
  std::atomic<bool> order_ready_{false};
  std::array<Event, kOrderEvents> order_events_{};  // written once under order_once_
  ScheduleExecutor schedule_;                       // the schedule's execution; guarded by mutex_
  std::atomic<uint64_t> prefetch_bytes_{0};
  std::atomic<uint64_t> lookahead_bytes_{0};
  // Of prefetch_bytes, those loaded while following a schedule for a launch it left them absent
  // for (LoadWhatFits; ScheduleAdherence::unscheduled_load_bytes).
  std::atomic<uint64_t> unscheduled_load_bytes_{0};
  std::atomic<uint64_t> evict_bytes_{0};
  std::atomic<uint64_t> discard_bytes_{0};
  std::atomic<uint64_t> overwrite_discard_bytes_{0};
  std::atomic<bool> overwrite_unsupported_{false};  // the device cannot discard: OnOverwrite off
  std::atomic<uint64_t> lookahead_window_{0};
  std::atomic<bool> step_seen_{false};     // the policy has predicted a step: time the launches
  std::atomic<bool> policy_times_{false};  // the policy wants kernel and step times (WantsTimes)
  // Something has had to go out (an eviction, or a schedule followed): until then the job fits
  // in the budget, nothing moves but first touches, and launches are not timed (two events each).
  std::atomic<bool> moving_{false};
  LaunchTimer timer_;     // used when options_.size_lookahead_from_time; thread-safe itself
  LookaheadSizer sizer_;  // guarded by mutex_
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_RESIDENCY_ENGINE_H_
