// The eviction-policy interface of the residency engine: a core every policy has (it is told which
// allocations each launch uses and which are forgotten, and picks the victims when the device
// budget is exceeded) and optional capabilities a policy has only if it can (step prediction,
// device times, a planned schedule), each found through an accessor of the core. The engine
// serializes all calls (its own lock), so a policy needs no locking of its own.
#ifndef SPILLWAY_POLICY_ENGINE_EVICTION_POLICY_H_
#define SPILLWAY_POLICY_ENGINE_EVICTION_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::policy {

// The id the engine gives chunk `chunk` (offset / 2 MiB) of arena `id` while it tracks the arena
// per chunk (a large allocation reached through interior pointers, split): such ids reach the
// policy in LaunchView::ids, Touch, Forget and PickVictim like allocations.
inline uint64_t ArenaPieceId(uint64_t id, uint64_t chunk) {
  return (uint64_t{1} << 63) | (id << 20) | chunk;
}
inline bool IsArenaPiece(uint64_t id) { return (id >> 63) != 0; }
inline uint64_t ArenaPieceAllocation(uint64_t piece) {
  return (piece & ~(uint64_t{1} << 63)) >> 20;
}
inline uint64_t ArenaPieceChunk(uint64_t piece) { return piece & ((uint64_t{1} << 20) - 1); }

// A 2 MiB chunk of an arena (a large allocation reached through interior pointers) that a launch's
// pointers name, while arenas stay whole in the engine (a policy with a schedule).
struct ArenaChunk {
  uint64_t id = 0;     // the allocation
  uint64_t chunk = 0;  // offset / 2 MiB
};

// One launch as a policy sees it: the kernel (0 when unknown) and the managed allocations of its
// access set in parameter order, with their sizes. `stamp` numbers the engine's launches (the key
// of ObserveKernelTime). For the allocations among `ids` that `arena_chunks` names, the launch
// uses only those chunks; the others it uses whole. `thread` names the thread that launched it
// (0: not known, as in a trace).
struct LaunchView {
  uint64_t function = 0;
  const uint64_t* ids = nullptr;
  const uint64_t* sizes = nullptr;
  size_t count = 0;
  uint64_t stamp = 0;
  const ArenaChunk* arena_chunks = nullptr;
  size_t arena_chunk_count = 0;
  uint64_t thread = 0;
};

// A move of a planned schedule (a policy file, policy/plan/planned_policy.h): part of one
// allocation.
struct ScheduledMove {
  enum class Kind { kEvict, kDiscard, kPrefetch, kPopulate };
  Kind kind = Kind::kPrefetch;
  uint64_t id = 0;      // the allocation
  uint64_t offset = 0;  // bytes from its base
  uint64_t bytes = 0;
  // An eviction whose range may not be on the device (the plan sends out what it has off the
  // device when following begins): the room it makes is not counted in the room ledger, so no
  // chunk coming in takes room that may not be there.
  bool maybe_absent = false;
};

// How closely a run followed a policy file: the exit summary's engine.policy_file.
struct ScheduleAdherence {
  std::string path;                 // the policy file
  bool aligned = false;             // following the schedule now
  uint64_t alignments = 0;          // times the step was recognised and following began
  uint64_t steps_followed = 0;      // whole steps followed to the end with the signature confirmed
  uint64_t positions_followed = 0;  // launches planned from the schedule
  uint64_t moves_planned = 0;       // schedule moves (chunk ranges) at the positions followed
  uint64_t moves_issued = 0;  // of them, handed to the engine (the others named no allocation)
  uint64_t evict_bytes = 0;   // bytes of the moves issued, by kind
  uint64_t discard_bytes = 0;
  uint64_t prefetch_bytes = 0;
  uint64_t populate_bytes = 0;
  uint64_t mismatches = 0;  // times the job left the planned step (the learned policy took over)
  // Bytes the engine loaded for a launch the schedule left them absent for (filled by the engine,
  // not the policy): the residency following began with differed from the plan's, or the plan
  // does not match the step exactly.
  uint64_t unscheduled_load_bytes = 0;
  uint64_t host_placements = 0;  // allocations a host rule placed on the host (advice accepted)
  uint64_t host_bytes = 0;       // their bytes
  uint64_t host_failures = 0;    // placements the device refused (those allocations are swapped)
  std::string fallback_reason;   // the latest reason the learned policy decided; empty: none
  // Online planning's trial of each plan against the learned policy (MakeOnlinePlannedPolicy):
  // "" (none: a policy file, or no plan yet), "running", "kept" or "rejected".
  std::string trial;
  double trial_plan_step_seconds = 0;     // the median step time following the plan
  double trial_learned_step_seconds = 0;  // and with the learned policy deciding
};

// A capability of a policy that predicts the next launches from a detected step (`learned`, and
// the planned policy through it): the engine's lookahead and Belady-style eviction ahead ask it,
// and the exit summary reports its counts. EvictionPolicy::step_predictor() gives it.
class StepPredictor {
 public:
  virtual ~StepPredictor() = default;

  // @brief The allocations the next `launches` launches are predicted to use, nearest first
  // (each id once); empty when the policy does not predict. `out` is cleared first.
  virtual void PredictNextUses(size_t launches, std::vector<uint64_t>* out) = 0;
  // @brief The sizes of the allocations that the next `launches` launches are predicted to use but
  // that do not exist yet (the successors of freed ones: a step's fresh activations), one entry
  // each; empty when the policy does not predict. `out` is cleared first.
  virtual void PredictUnallocated(size_t launches, std::vector<uint64_t>* out) = 0;
  // @brief How many launches from now allocation `id` is predicted to be used next;
  // kNoPrediction when the policy cannot tell (or predicts no use within a step).
  virtual uint64_t NextUse(uint64_t id) = 0;
  static constexpr uint64_t kNoPrediction = ~uint64_t{0};

  // @brief Launches whose access set the policy had predicted correctly.
  virtual uint64_t predicted_launches() const = 0;
  // @brief The detected step length in launches; 0 when none is detected.
  virtual uint64_t step_length() const = 0;
  // @brief Launches that repeated a launch of the previous step at another place in it (the
  // job's launch order changes from step to step; `learned`).
  virtual uint64_t reordered_launches() const { return 0; }
  // @brief How many launches ahead NextUse and PredictNextUses can see; 0 when they predict
  // nothing. The step length, or, where each launching thread has a step of its own and the whole
  // launch sequence none (`learned`), the launches of the whole sequence that the longest of those
  // steps spans.
  virtual uint64_t prediction_horizon() const { return step_length(); }
  // @brief The launching threads whose own step predicts next uses because the whole launch
  // sequence has none (`learned`); 0 when the step is the whole sequence's or none is found.
  virtual uint64_t thread_steps() const { return 0; }
};

// A capability of a policy that wants the device times of launches and steps (online planning's
// recording and its trial of a plan). EvictionPolicy::time_observer() gives it.
class TimeObserver {
 public:
  virtual ~TimeObserver() = default;

  // @brief Whether the policy wants ObserveKernelTime and ObserveStepTime now (the engine then
  // times launches and steps).
  virtual bool WantsTimes() const = 0;
  // @brief Launch `stamp` (LaunchView::stamp) ran for `seconds` on the device: measured with
  // timing events, delivered some launches later, only while WantsTimes() or the engine sizes its
  // lookahead from time, and only once something moves and a step is detected.
  virtual void ObserveKernelTime(uint64_t stamp, double seconds) = 0;
  // @brief For the launch just observed: nonzero when it begins a step the policy wants timed, the
  // mark's tag (counting up; a tag skipped tells the engine the previous mark began no whole step).
  virtual uint64_t TakeStepMark() = 0;
  // @brief The step begun at mark `tag` (TakeStepMark) took `seconds` on the device until the mark
  // `tag` + 1: measured with timing events where the launches arrive, so with every stall the
  // engine's moves and the device's faults caused; delivered as ObserveKernelTime is, a mark
  // whose event the engine could not record gives no sample.
  virtual void ObserveStepTime(uint64_t tag, double seconds) = 0;
};

// A capability of a policy that follows a planned schedule (a policy file or an online plan,
// policy/plan/planned_policy.h): its moves replace the engine's own at the launches it decides, and
// its rules keep allocations on the host or off the device. EvictionPolicy::schedule_source() gives
// it.
class ScheduleSource {
 public:
  virtual ~ScheduleSource() = default;

  // @brief A managed allocation of `bytes` was made at `call_site` (Allocation::call_site) or
  // found when the engine started.
  virtual void ObserveAllocated(uint64_t id, uint64_t bytes, uint64_t call_site) = 0;
  // @brief For the launch just observed: true when a schedule decides its moves, which are then
  // `out` (the engine issues them in order instead of planning the launch itself).
  virtual bool ScheduledMoves(std::vector<ScheduledMove>* out) = 0;
  // @brief Whether the engine may prefetch allocation `id` when it plans a launch itself (a
  // policy file's host and never rules say no).
  virtual bool MayPrefetch(uint64_t id) = 0;
  // @brief The allocations newly placed on the host (a policy file's host rules) since the last
  // call, each once; `out` is cleared first. The engine advises the device to keep them on the host
  // and map them remotely (Device::PlaceOnHost), and from then on neither moves them nor counts
  // them against the budget.
  virtual void TakeHostPlacements(std::vector<uint64_t>* out) = 0;
  // @brief The device refused to place allocation `id` on the host (`result`: its CUresult): the
  // policy moves it as it would a `swap` allocation from now on.
  virtual void HostPlacementFailed(uint64_t id, int result) = 0;
  // @brief How closely the run followed a policy file.
  virtual const ScheduleAdherence* adherence() const = 0;
};

// The core every policy has; what only some have are the capabilities above, each given by its
// accessor (null: the policy has none; a policy's answer never changes).
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // @brief The name the exit summary reports ("lru", "learned", "none").
  virtual std::string_view name() const = 0;
  // @brief Whether the engine moves data for this policy. False (the `none` policy): the engine
  // keeps its books but issues no prefetch, eviction or discard; the device pages on demand.
  virtual bool MovesData() const { return true; }
  // @brief A launch is being planned; called before the Touch calls of its access set.
  virtual void ObserveLaunch(const LaunchView& /*launch*/) {}
  // @brief Allocation `id` is used by the launch being planned (the newest use).
  virtual void Touch(uint64_t id) = 0;
  // @brief Allocation `id` is gone (freed); it must never be named again.
  virtual void Forget(uint64_t id) = 0;
  // @brief Arena `id` is tracked per chunk from now on (ArenaPieceId): the whole is not named
  // again until Merged(id); the pieces are Touched. By default the same as Forget.
  virtual void Split(uint64_t id) { Forget(id); }
  // @brief Arena `id` is tracked whole again (its pieces were Forgotten): named again, as the
  // newest use. By default the same as Touch.
  virtual void Merged(uint64_t id) { Touch(id); }
  // @brief Whether arenas must stay whole (a schedule names whole allocations): the engine then
  // splits none and merges those it has split.
  virtual bool ArenasWhole() const { return false; }
  // @brief The next victim among the allocations for which `evictable(id)` is true, or 0 when
  // there is none. Picking does not forget: the engine calls Forget or Touch as it sees fit.
  virtual uint64_t PickVictim(bool (*evictable)(const void* context, uint64_t id),
                              const void* context) = 0;

  // The capabilities.
  virtual StepPredictor* step_predictor() { return nullptr; }
  virtual TimeObserver* time_observer() { return nullptr; }
  virtual ScheduleSource* schedule_source() { return nullptr; }
};

// The least-recently-used policy: victims in order of last use, oldest first.
std::unique_ptr<EvictionPolicy> MakeLruPolicy();

// The learned policy (policy/engine/learned_policy.cc): detects the repeating training step online
// and evicts the allocation whose next use is farthest; lru until a step is detected.
std::unique_ptr<EvictionPolicy> MakeLearnedPolicy();
// For tests: what `learned` (made by MakeLearnedPolicy) would answer to NextUse(id) by scanning
// the last step's launches, against which its index is checked.
uint64_t LearnedNextUseByScan(const EvictionPolicy& learned, uint64_t id);

// The `none` policy (policy/engine/no_move_policy.cc): the engine moves nothing (MovesData() is
// false), so managed allocations are paged by the device on demand: plain unified memory, a
// baseline.
std::unique_ptr<EvictionPolicy> MakeNoMovePolicy();

// The policy named `name` ("lru", "learned" or "none"); null for another name.
std::unique_ptr<EvictionPolicy> MakePolicy(std::string_view name);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_EVICTION_POLICY_H_
