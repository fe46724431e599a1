// The planned policy (see planned_policy.h): step recognition, allocation binding and the
// schedule's moves per launch position, over a learned policy that decides whenever the schedule
// does not.
#include "policy/plan/planned_policy.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "policy/plan/background_plan.h"
#include "policy/plan/plan_trial.h"
#include "policy/plan/step_signature.h"

namespace spillway::policy {
namespace {

// The events of the step the rolling hash spans: the file's, or 1 where the engine does not
// follow a step that long (the policy is then unusable), so a count in the file never sizes
// memory beyond kMaxStepEvents.
uint64_t FollowedEvents(const PolicyFile& file) {
  return file.step_events <= kMaxStepEvents ? file.step_events : 1;
}

class PlannedPolicy final : public EvictionPolicy,
                            public StepPredictor,
                            public TimeObserver,
                            public ScheduleSource {
 public:
  PlannedPolicy(PolicyFile file, std::string path, uint64_t budget_bytes, PolicyLog log,
                CallSiteModules modules, std::string load_problem)
      : file_(std::move(file)),
        log_(std::move(log)),
        modules_(std::move(modules)),
        learned_(MakeLearnedPolicy()),
        learned_predictor_(learned_->step_predictor()),
        hash_(FollowedEvents(file_)) {
    adherence_.path = std::move(path);
    std::string problem = std::move(load_problem);
    if (problem.empty() && file_.step_signature == 0) {
      problem = absl::StrCat(adherence_.path,
                             ": the policy has no step signature (model.step_signature; plan it "
                             "again with spillway-plan), so the engine cannot follow it");
    }
    if (problem.empty() && file_.step_events > kMaxStepEvents) {
      problem = absl::StrCat(adherence_.path, ": the policy's step has ", file_.step_events,
                             " events, more than the engine follows (", kMaxStepEvents, ")");
    }
    if (problem.empty() && file_.budget_bytes > budget_bytes) {
      problem = absl::StrCat(adherence_.path, ": planned for ", file_.budget_bytes,
                             " bytes of device memory, the engine has ", budget_bytes);
    }
    usable_ = problem.empty();
    if (!usable_) Fallback(true, problem);
    for (const PolicyRule& rule : file_.rules) {
      if (!log_ || modules_ || (rule.call_site.empty() && rule.module.empty())) continue;
      log_(true,
           absl::StrCat(adherence_.path, rule.line > 0 ? absl::StrCat(":", rule.line) : "",
                        ": this rule matches by ", rule.call_site.empty() ? "module" : "call_site",
                        ", but this run takes no call stacks (libunwind.so.8 could not be "
                        "loaded); it matches nothing here"));
    }
  }

  // Online planning (MakeOnlinePlannedPolicy): no file yet, `planner` makes one.
  PlannedPolicy(uint64_t budget_bytes, PolicyLog log, StepPlanner planner, bool in_background)
      : log_(std::move(log)),
        learned_(MakeLearnedPolicy()),
        learned_predictor_(learned_->step_predictor()),
        hash_(1),
        planner_(std::move(planner)),
        budget_bytes_(budget_bytes),
        in_background_(in_background),
        recording_(true) {
    adherence_.path = "online plan";
    adherence_.fallback_reason =
        "no plan yet: the learned policy decides while the step is recorded";
  }

  std::string_view name() const override {
    return usable_ && !planner_ ? "planned" : learned_->name();
  }
  StepPredictor* step_predictor() override { return this; }
  TimeObserver* time_observer() override { return this; }
  ScheduleSource* schedule_source() override { return this; }

  void ObserveAllocated(uint64_t id, uint64_t bytes, uint64_t call_site) override {
    if (recording_) recorded_.Allocated(id, bytes, call_site);
    sizes_[id] = bytes;
    if (call_site != 0 && modules_) call_sites_[id] = call_site;
    order_.push_back(id);
    if (order_.size() > 2 * sizes_.size() + 64) PruneOrder();
    ApplyRules(id, 0);  // by size; by order once bound
    if (!usable_) return;
    if (aligned_) {
      const uint64_t w = next_local_++;
      if (w > file_.allocations && file_.allocations != 0) {
        Mismatch(
            absl::StrCat("the step makes more allocations than the policy's ", file_.allocations));
      } else {
        Bind(w, id);
        ApplyRules(id, w);
      }
    }
    Event(AllocToken(bytes), ShapeOfAllocation(bytes));
  }

  void ObserveLaunch(const LaunchView& launch) override {
    FlushPieceForgets();
    learned_->ObserveLaunch(planner_ ? LearnedView(launch) : launch);
    // Whoever decides, and while recording: at an alignment, the step just seen says which
    // persistent allocations the step uses (Align).
    ++launches_seen_;
    for (size_t i = 0; i < launch.count; ++i) used_at_[launch.ids[i]] = launches_seen_;
    // A plan made at this launch has counted it already (TryPlan).
    if (recording_ && Record(launch)) return;
    if (!usable_) return;
    if (aligned_ && !paused_) {
      PlanPosition();
    } else if (aligned_) {
      ++position_;  // the trial lets the learned policy decide this step
    }
    Event(WholeLaunchToken(launch), kShapeLaunch);
  }

  void ObserveKernelTime(uint64_t stamp, double seconds) override {
    if (!recording_ || seconds <= 0) return;
    recorded_.kernel_seconds[stamp] = seconds;
    ++timed_;
  }
  uint64_t TakeStepMark() override { return std::exchange(pending_mark_, 0); }
  void ObserveStepTime(uint64_t tag, double seconds) override { trial_.StepTime(tag, seconds); }
  bool WantsTimes() const override { return recording_ || trial_.running(); }

  void Touch(uint64_t id) override {
    const auto pieces = whole_arena_pieces_.find(id);
    if (pieces == whole_arena_pieces_.end()) {
      learned_->Touch(id);
      return;
    }
    for (const uint64_t piece : pieces->second) learned_->Touch(piece);
  }

  // An arena split into chunks (the learned policy deciding, no usable schedule) is still the
  // allocation the schedule numbers and the recording names: only the learned policy forgets it.
  void Split(uint64_t id) override { learned_->Split(id); }
  // Online planning: the learned policy keeps the arena's chunks (LearnedView), and the engine's
  // Forget of each chunk just before was the merge, not a free.
  void Merged(uint64_t id) override {
    if (!planner_) {
      learned_->Merged(id);
      return;
    }
    std::erase_if(piece_forgets_,
                  [id](uint64_t piece) { return ArenaPieceAllocation(piece) == id; });
    FlushPieceForgets();
  }
  // A schedule names whole allocations: a file that can be followed keeps arenas whole from the
  // start; an online plan from the step it is followed at (the learned policy moves an arena's
  // chunks until then, whenever the job leaves the step, and in the trial's learned steps).
  bool ArenasWhole() const override { return usable_ && !paused_ && (aligned_ || !planner_); }

  void Forget(uint64_t id) override {
    if (planner_ && IsArenaPiece(id)) {
      piece_forgets_.push_back(id);  // the arena is merged (Merged) or freed (Forget of it) next
    } else {
      FlushPieceForgets();
      ForgetLearnedPieces(id);
      learned_->Forget(id);
    }
    if (recording_) recorded_.Freed(id);
    used_at_.erase(id);
    const auto it = sizes_.find(id);
    const uint64_t bytes = it == sizes_.end() ? 0 : it->second;
    if (it != sizes_.end()) sizes_.erase(it);
    call_sites_.erase(id);
    pinned_.erase(id);
    if (host_.erase(id) != 0) std::erase(host_pending_, id);
    no_host_.erase(id);
    const auto bound = workload_id_.find(id);
    if (bound != workload_id_.end()) {
      binding_[bound->second] = 0;
      workload_id_.erase(bound);
    }
    // An arena's chunk (merged back into its allocation) is no allocation of the job's.
    if (usable_ && !IsArenaPiece(id)) Event(FreeToken(bytes), kShapeFree);
  }

  uint64_t PickVictim(bool (*evictable)(const void* context, uint64_t id),
                      const void* context) override {
    if (pinned_.empty()) return learned_->PickVictim(evictable, context);
    // Kept, host and never allocations are no victims.
    struct Wrapped {
      bool (*evictable)(const void*, uint64_t);
      const void* context;
      const std::unordered_map<uint64_t, RuleAction>* pinned;
    };
    const Wrapped wrapped{evictable, context, &pinned_};
    return learned_->PickVictim(
        [](const void* c, uint64_t id) {
          const auto* w = static_cast<const Wrapped*>(c);
          return !w->pinned->contains(id) && w->evictable(w->context, id);
        },
        &wrapped);
  }

  void PredictNextUses(size_t launches, std::vector<uint64_t>* out) override {
    learned_predictor_->PredictNextUses(launches, out);
    std::erase_if(*out, [this](uint64_t id) { return !MayPrefetch(id); });
  }
  void PredictUnallocated(size_t launches, std::vector<uint64_t>* out) override {
    learned_predictor_->PredictUnallocated(launches, out);
  }
  uint64_t NextUse(uint64_t id) override { return learned_predictor_->NextUse(id); }
  uint64_t predicted_launches() const override { return learned_predictor_->predicted_launches(); }
  uint64_t step_length() const override { return learned_predictor_->step_length(); }
  uint64_t prediction_horizon() const override { return learned_predictor_->prediction_horizon(); }
  uint64_t thread_steps() const override { return learned_predictor_->thread_steps(); }
  uint64_t reordered_launches() const override { return learned_predictor_->reordered_launches(); }

  bool ScheduledMoves(std::vector<ScheduledMove>* out) override {
    out->clear();
    if (!have_moves_) return false;
    have_moves_ = false;
    out->swap(moves_);
    return true;
  }

  bool MayPrefetch(uint64_t id) override {
    const auto it = pinned_.find(id);
    return it == pinned_.end() || it->second == RuleAction::kKeep;
  }

  void TakeHostPlacements(std::vector<uint64_t>* out) override {
    out->clear();
    out->swap(host_pending_);
  }

  void HostPlacementFailed(uint64_t id, int result) override {
    if (host_.erase(id) == 0) return;
    no_host_.insert(id);
    pinned_.erase(id);  // moved as swap from now on
    const auto size = sizes_.find(id);
    const uint64_t bytes = size == sizes_.end() ? 0 : size->second;
    adherence_.host_placements -= std::min<uint64_t>(adherence_.host_placements, 1);
    adherence_.host_bytes -= std::min(adherence_.host_bytes, bytes);
    // One line for the first refusal; later ones are counted (engine.policy_file.host_failures).
    if (adherence_.host_failures++ == 0 && log_) {
      log_(true, absl::StrCat(adherence_.path, ": the device refused to place an allocation of ",
                              bytes, " bytes on the host (cuMemAdvise: error ", result,
                              "); host-rule allocations it refuses are swapped instead"));
    }
  }

  const ScheduleAdherence* adherence() const override { return &adherence_; }

 private:
  // Online planning: the launch as the learned policy sees it. While the plan is followed the
  // engine keeps arenas whole (a launch names the arena and, in arena_chunks, the chunks its
  // pointers reach); the learned policy goes on seeing those chunks as the engine names them when
  // it splits arenas (ArenaPieceId, in the same order, with their sizes), so its step stays
  // locked and its next uses known across the switches: it is warm whenever it takes over (the
  // trial's learned steps, a step the job leaves). The arena's Touch becomes its chunks'.
  const LaunchView& LearnedView(const LaunchView& launch) {
    whole_arena_pieces_.clear();
    if (launch.arena_chunk_count == 0) return launch;
    view_ids_.clear();
    view_sizes_.clear();
    bool translated = false;
    for (size_t i = 0; i < launch.count; ++i) {
      const uint64_t id = launch.ids[i], bytes = launch.sizes[i];
      std::vector<uint64_t>* pieces = nullptr;
      for (size_t c = 0; c < launch.arena_chunk_count; ++c) {
        const ArenaChunk& chunk = launch.arena_chunks[c];
        const uint64_t offset = chunk.chunk * kChunkBytes;
        if (chunk.id != id || IsArenaPiece(id) || offset >= bytes) continue;
        const uint64_t piece = ArenaPieceId(id, chunk.chunk);
        if (std::find(view_ids_.begin(), view_ids_.end(), piece) != view_ids_.end()) continue;
        if (pieces == nullptr) {
          pieces = &whole_arena_pieces_[id];
          learned_arenas_.try_emplace(id, bytes);
          translated = true;
        }
        pieces->push_back(piece);
        view_ids_.push_back(piece);
        view_sizes_.push_back(std::min(kChunkBytes, bytes - offset));
      }
      if (pieces == nullptr) {
        view_ids_.push_back(id);
        view_sizes_.push_back(bytes);
      }
    }
    if (!translated) return launch;  // the engine split its arenas: the view is the learned one
    learned_view_ = launch;
    learned_view_.ids = view_ids_.data();
    learned_view_.sizes = view_sizes_.data();
    learned_view_.count = view_ids_.size();
    return learned_view_;
  }

  // Tells the learned policy of the arena chunks the engine forgot, when no merge took them back.
  void FlushPieceForgets() {
    for (const uint64_t piece : piece_forgets_) learned_->Forget(piece);
    piece_forgets_.clear();
  }

  // Allocation `id` is freed: the learned policy forgets the chunks LearnedView gave it of it.
  void ForgetLearnedPieces(uint64_t id) {
    const auto arena = learned_arenas_.find(id);
    if (arena == learned_arenas_.end()) return;
    for (uint64_t c = 0; c * kChunkBytes < arena->second; ++c)
      learned_->Forget(ArenaPieceId(id, c));
    learned_arenas_.erase(arena);
  }

  // Online planning: appends the launch to the recording (an arena's chunks as named, an arena
  // used whole as all its chunks, other allocations whole), and plans once it is time. True when
  // a plan was made (and this launch counted in its step).
  bool Record(const LaunchView& launch) {
    accesses_.clear();
    // Chunk `offset` of allocation `id` (of `bytes`), when it lies within it.
    const auto add_chunk = [this](uint64_t id, uint64_t offset, uint64_t bytes) {
      if (offset < bytes) {
        accesses_.push_back(RecordedAccess{id, offset, std::min(kChunkBytes, bytes - offset)});
      }
    };
    for (size_t i = 0; i < launch.count; ++i) {
      const uint64_t id = launch.ids[i];
      if (IsArenaPiece(id)) {  // a chunk of an arena the engine has split
        const uint64_t arena = ArenaPieceAllocation(id);
        const auto size = sizes_.find(arena);
        if (size == sizes_.end()) continue;
        add_chunk(arena, ArenaPieceChunk(id) * kChunkBytes, size->second);
        arenas_.insert(arena);
        continue;
      }
      const uint64_t bytes = launch.sizes[i];
      bool named = false;
      for (size_t c = 0; c < launch.arena_chunk_count; ++c) {
        if (launch.arena_chunks[c].id != id) continue;
        named = true;
        add_chunk(id, launch.arena_chunks[c].chunk * kChunkBytes, bytes);
      }
      if (named) {
        arenas_.insert(id);
      } else if (arenas_.contains(id)) {
        for (uint64_t offset = 0; offset < bytes; offset += kChunkBytes)
          add_chunk(id, offset, bytes);
      } else {
        accesses_.push_back(RecordedAccess{id, 0, 0});
      }
    }
    recorded_.Launched(absl::StrCat("function ", launch.function), launch.stamp, accesses_);
    // A plan is followed by its step's exact sequence of events, which neither of these repeats.
    if (learned_predictor_->thread_steps() != 0) {
      return NoPlan("the job's threads launch at once, in a different interleaving every step",
                    "the learned policy decides from each thread's own step");
    }
    const uint64_t step = learned_predictor_->step_length();
    if (const uint64_t moved = learned_predictor_->reordered_launches() - reordered_at_start_;
        moved != 0) {
      // Launches paired with one a step earlier at another place: the order changes from step to
      // step, or a step unlike the rest went by (a first step that creates the optimizer's state
      // shifts the pairing once). A step in a changing order cannot be followed by a plan; one
      // odd step can: planning waits for two steps with no launch moved, and gives up when
      // launches moved in kReorderedSteps steps.
      static constexpr int kReorderedSteps = 3;
      reordered_at_start_ += moved;
      reordered_moved_ += moved;
      // A move in another step-long stretch of the recording than the latest is another step.
      const uint64_t bucket = recorded_.launches() / std::max<uint64_t>(step, 1);
      if (reordered_steps_ == 0 || bucket != last_reorder_) ++reordered_steps_;
      last_reorder_ = bucket;
      if (reordered_steps_ >= kReorderedSteps) {
        return NoPlan(
            absl::StrCat("the job launches its kernels in an order that changes from "
                         "step to step (",
                         reordered_moved_, reordered_moved_ == 1 ? " launch" : " launches",
                         " moved within the step in ", reordered_steps_,
                         " steps while it was recorded)"),
            "the learned policy decides");
      }
      next_try_ = std::max(next_try_, recorded_.launches() + 2 * step);
    }
    if (planning_.running()) {
      // Planning on its own thread: the learned policy decides until the plan is taken here.
      std::optional<BackgroundPlan::Result> done = planning_.Take();
      return done.has_value() && PlanMade(step, std::move(done->plan), done->seconds);
    }
    if (step != 0 && timed_ >= step && recorded_.launches() >= next_try_) {
      return TryPlan(step);
    }
    if (recorded_.launches() >= kOnlinePlanLaunchLimit) {
      StopRecording(absl::StrCat("online plan: no plan after ", recorded_.launches(), " launches (",
                                 step == 0     ? "no repeating step detected"
                                 : timed_ == 0 ? "no kernel was timed: nothing had to move"
                                               : "too few kernel times",
                                 "); the learned policy decides"),
                    timed_ != 0 && step != 0);
    }
    return false;
  }

  // Plans the recording; follows the plan (from the next step that matches it) or tries again a
  // step later, at most kTries times. True when a plan is followed. The step signature's hash
  // starts with the recording's last step of events (their tokens name whole allocations, as the
  // schedule does, where the engine's view had an arena's chunks), so the plan is followed from
  // the next step's start.
  // In the background (in_background_) the planner gets a copy of the recording, which goes on
  // meanwhile; the result is taken by a later launch (PlanMade).
  bool TryPlan(uint64_t step) {
    planned_launches_ = recorded_.launches();
    if (in_background_ && planning_.Start(planner_, recorded_, budget_bytes_)) return false;
    // Here (no thread could be made, or asked for).
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<StepPlan> plan = planner_(recorded_, budget_bytes_);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return PlanMade(step, std::move(plan), seconds);
  }

  // What TryPlan's planning gave, `seconds` after it began: the plan is followed from the next
  // step that matches it, or planning is tried again later or given up. True when followed.
  bool PlanMade(uint64_t step, absl::StatusOr<StepPlan> plan, double seconds) {
    static constexpr int kTries = 3;
    if (!plan.ok()) {
      // A recording that holds no two whole steps yet (the learned policy may have locked a
      // repeating stretch within the step, such as alike layers, and so asked for a plan too soon)
      // is planned again once it is twice as long, up to kOnlinePlanLaunchLimit; only other
      // failures use up a try.
      if (IsNoRepeatingStep(plan.status())) {
        next_try_ = std::max(2 * recorded_.launches(), recorded_.launches() + step);
        return false;
      }
      if (++tries_ < kTries) {
        next_try_ = recorded_.launches() + step;
        return false;
      }
      StopRecording(
          absl::StrCat("online plan: ", plan.status().message(), "; the learned policy decides"),
          true);
      return false;
    }
    file_ = std::move(plan->file);
    if (file_.step_signature == 0 || file_.step_events > kMaxStepEvents ||
        file_.budget_bytes > budget_bytes_) {
      StopRecording(
          "online plan: the plan made cannot be followed (no step signature, a step too long "
          "to follow, or over the budget); the learned policy decides",
          true);
      return false;
    }
    ++plans_;
    hash_ = RollingStepHash(file_.step_events);
    const std::vector<RecordedEvent>& events = recorded_.events;
    for (size_t i = events.size() - std::min<size_t>(events.size(), file_.step_events);
         i < events.size(); ++i) {
      hash_.Add(events[i].token);
    }
    usable_ = true;
    paused_ = false;
    unmatched_events_ = 0;
    trial_.Start();
    adherence_.trial = "running";
    adherence_.fallback_reason = "planned: waiting for the step's start";
    StopRecording(absl::StrFormat("online plan: %s (planned in %.2f s%s, from %zu launches "
                                  "recorded); following it from the next step",
                                  plan->description, seconds,
                                  in_background_ ? " on its own thread" : "", planned_launches_),
                  false);
    if (hash_.Matches(file_.step_signature)) Align();  // this launch ended a step
    return true;
  }

  // Online planning: stops for good, with an info line, where a plan could not be followed.
  bool NoPlan(const std::string& why, const std::string& who_decides) {
    adherence_.fallback_reason = absl::StrCat("no plan: ", why, "; ", who_decides);
    StopRecording(absl::StrCat("online plan: none; ", why, ", so ", who_decides), false);
    return false;
  }

  void StopRecording(const std::string& line, bool problem) {
    recording_ = false;
    planning_.Drop();  // a planning still running is of a recording no longer wanted
    recorded_ = RecordedEvents{};
    arenas_.clear();
    if (problem) {
      Fallback(true, line);
    } else if (log_) {
      log_(false, line);
    }
  }

  // The launch's token as the step signature has it: the sizes of the distinct allocations it
  // uses, in parameter order, an arena's chunks standing for the arena.
  uint64_t WholeLaunchToken(const LaunchView& launch) {
    whole_sizes_.clear();
    whole_ids_.clear();
    for (size_t i = 0; i < launch.count; ++i) {
      uint64_t id = launch.ids[i], bytes = launch.sizes[i];
      if (IsArenaPiece(id)) {
        id = ArenaPieceAllocation(id);
        const auto size = sizes_.find(id);
        bytes = size == sizes_.end() ? 0 : size->second;
      }
      if (std::find(whole_ids_.begin(), whole_ids_.end(), id) != whole_ids_.end()) continue;
      whole_ids_.push_back(id);
      whole_sizes_.push_back(bytes);
    }
    return LaunchToken(whole_sizes_.data(), whole_sizes_.size());
  }

  // One event of the job: counts it in the step being followed and checks the step's end.
  // `shape`: what the event is (NoteShape).
  void Event(uint64_t token, uint64_t shape) {
    if (!planner_ && !checked_) NoteShape(shape);
    hash_.Add(token);
    if (aligned_) {
      if (++event_in_step_ < file_.step_events) return;
      if (hash_.Matches(file_.step_signature)) {
        if (!paused_) ++adherence_.steps_followed;
        StartStep();
        return;
      }
      Mismatch("the step's events do not match the policy's step signature");
      return;
    }
    if (hash_.Matches(file_.step_signature)) {
      Align();
    } else if (planner_) {
      // Online: a plan the job's steps no longer match (since it was made, or since the job left
      // it) is made again from a new recording.
      if (++unmatched_events_ == 3 * file_.step_events + 1000) Replan();
    } else if (adherence_.alignments == 0 && ++unmatched_events_ == 3 * file_.step_events + 1000) {
      Fallback(true, absl::StrCat(adherence_.path,
                                  ": no step of the job has matched the policy's "
                                  "step signature in ",
                                  unmatched_events_,
                                  " events (is it planned for this job?); the learned policy "
                                  "decides"));
    }
  }

  // Online planning: the job's step has changed; records it again (at most kMaxPlans plans in
  // all), the learned policy deciding meanwhile. The recording starts from the allocations live
  // now, in the order they were made.
  void Replan() {
    static constexpr int kMaxPlans = 4;
    usable_ = false;
    aligned_ = false;
    paused_ = false;
    pending_mark_ = 0;
    adherence_.aligned = false;
    if (trial_.running()) {  // no verdict on a plan the job no longer runs
      trial_.Stop();
      adherence_.trial.clear();
    }
    if (plans_ >= kMaxPlans) {
      Fallback(true, absl::StrCat("online plan: the job's step has changed after each of ", plans_,
                                  " plans; the learned policy decides from now on"));
      return;
    }
    PruneOrder();
    for (const uint64_t id : order_) recorded_.Allocated(id, sizes_.at(id), 0);
    recording_ = true;
    reordered_at_start_ = learned_predictor_->reordered_launches();
    reordered_moved_ = 0;
    reordered_steps_ = 0;
    last_reorder_ = 0;
    timed_ = 0;
    next_try_ = 0;
    tries_ = 0;
    Fallback(false,
             absl::StrCat("online plan: no step of the job has matched the plan in ",
                          unmatched_events_, " events (its step has changed); recording it again"));
    if (log_) log_(false, adherence_.fallback_reason);
  }

  // A step of the planned shape has just ended: bind the persistent allocations and follow.
  void Align() {
    std::vector<uint64_t> live;
    for (const uint64_t id : order_) {
      if (sizes_.contains(id)) live.push_back(id);
    }
    order_ = live;
    if (live.size() == file_.persistent && !planner_ && !checked_ && !CheckFile(live)) return;
    if (live.size() != file_.persistent) {
      if (!logged_binding_) {
        logged_binding_ = true;
        Fallback(true, absl::StrCat(adherence_.path, ": the job's step matches the policy's, but ",
                                    live.size(),
                                    " allocations are live at its start where the policy "
                                    "has ",
                                    file_.persistent, " persistent ones"));
      }
      return;
    }
    // Sized by what the job has (Bind grows it), never by a count the file states.
    binding_.assign(live.size() + 1, 0);
    workload_id_.clear();
    for (uint64_t w = 1; w <= live.size(); ++w) {
      Bind(w, live[w - 1]);
      ApplyRules(live[w - 1], w);
    }
    aligned_ = true;
    adherence_.aligned = true;
    off_at_start_ = OffDeviceAtStepStart(file_);
    // Of the persistent allocations the step just seen did not use, the plan has on the device only
    // what it sends out (the simulator's device holds what a launch or a move put there).
    std::vector<uint64_t> persistent_bytes;
    for (const uint64_t id : live) {
      const auto used = used_at_.find(id);
      const bool in_step = used != used_at_.end() && used->second + file_.launches > launches_seen_;
      persistent_bytes.push_back(in_step ? sizes_.at(id) : 0);
    }
    on_at_start_ = OnDeviceAtStepStart(file_, persistent_bytes);
    reconcile_ = true;
    unmatched_events_ = 0;
    adherence_.fallback_reason.clear();
    ++adherence_.alignments;
    if (log_ && adherence_.alignments == 1) {
      log_(false, absl::StrCat(adherence_.path, ": recognised the planned step (", file_.launches,
                               " launches); following the policy's schedule"));
    }
    StartStep();
  }

  void StartStep() {
    event_in_step_ = 0;
    position_ = 0;
    next_entry_ = 0;
    next_local_ = file_.persistent + 1;
    PruneOrder();
    if (trial_.running()) TrialStep();
  }

  // Online planning: a step of the plan's shape begins during the plan's trial
  // (policy/plan/plan_trial.h). The trial says whether this step follows the plan and when the step
  // begins (a mark for the engine to time); once it has its verdict, the plan is followed on or
  // the learned policy decides from now on.
  void TrialStep() {
    pending_mark_ = trial_.StepStarts();
    const bool was_paused = paused_;
    paused_ = trial_.state() == PlanTrial::State::kLearning;
    // The plan takes over again from the learned policy's step: what that left on the device is
    // sent where the plan has it (PlanPosition).
    if (was_paused && !paused_) reconcile_ = true;
    adherence_.aligned = !paused_;
    adherence_.trial_plan_step_seconds = trial_.plan_seconds();
    adherence_.trial_learned_step_seconds = trial_.learned_seconds();
    if (trial_.running()) return;
    const bool kept = trial_.state() == PlanTrial::State::kKept;
    adherence_.trial = kept ? "kept" : "rejected";
    const std::string line = trial_.Verdict();
    if (!kept) {
      usable_ = false;
      aligned_ = false;
      adherence_.aligned = false;
      have_moves_ = false;
      moves_.clear();
      Fallback(false, line);
    }
    if (log_) log_(false, line);
  }

  // Until a policy file has been checked against the job's step (CheckFile), the last
  // `step_events` events' shapes: a launch, a free, or an allocation and its size.
  static constexpr uint64_t kShapeLaunch = 1, kShapeFree = 2;
  static uint64_t ShapeOfAllocation(uint64_t bytes) { return bytes << 2; }
  void NoteShape(uint64_t shape) {
    if (file_.step_events == 0) return;
    if (shape_.size() < file_.step_events) {
      shape_.push_back(shape);
    } else {
      shape_[shape_next_] = shape;
    }
    shape_next_ = (shape_next_ + 1) % file_.step_events;
  }

  // The step of a policy file has just been recognised for the first time, `live` its persistent
  // allocations: checks the file against what the step holds (its launches, its allocations and
  // their sizes) with the check spillway simulate makes (CheckPolicyMatches; the fingerprint
  // aside, as the engine sees no kernel names). False, with the file's line in the log and the
  // summary, when the file names what the step does not have: the learned policy decides.
  bool CheckFile(const std::vector<uint64_t>& live) {
    checked_ = true;
    JobStep job;
    for (const uint64_t id : live) job.allocation_bytes.push_back(sizes_.at(id));
    // shape_ holds exactly the step's events (the hash over them matched), oldest at shape_next_.
    for (size_t i = 0; i < shape_.size(); ++i) {
      const uint64_t shape = shape_[(shape_next_ + i) % shape_.size()];
      if (shape == kShapeLaunch) {
        ++job.launches;
      } else if (shape != kShapeFree) {
        job.allocation_bytes.push_back(shape >> 2);
      }
    }
    std::vector<uint64_t>().swap(shape_);
    const absl::Status s = CheckPolicyMatches(file_, adherence_.path, job);
    if (s.ok()) return true;
    usable_ = false;
    Fallback(true, absl::StrCat(s.message(), "; the learned policy decides"));
    return false;
  }

  // Drops freed allocations from order_.
  void PruneOrder() {
    std::erase_if(order_, [this](uint64_t id) { return !sizes_.contains(id); });
  }

  void Bind(uint64_t w, uint64_t id) {
    if (w >= binding_.size()) binding_.resize(w + 1, 0);
    binding_[w] = id;
    workload_id_[id] = w;
  }

  // The moves of the launch at position_ (before its token is counted).
  void PlanPosition() {
    moves_.clear();
    have_moves_ = true;
    const auto& schedule = file_.schedule;
    while (next_entry_ < schedule.size() && schedule[next_entry_].position < position_) {
      ++next_entry_;
    }
    ++adherence_.positions_followed;
    // Following begins (again) at the step's start: the device holds what the learned policy left
    // there, which may not be what the plan has there. What the plan has off the device is sent
    // out first (a no-op for what is not resident), so that the plan's moves find the room they
    // expect and the device does not fill past its budget and evict on its own. What the plan has
    // on the device is then brought in (a no-op for what is resident): the plan never prefetches
    // it before its use, and a demand fault for it would take room the ledger does not know of.
    // These prefetches take the ledger's room as any other (if they bring nothing, later moves
    // only wait longer for theirs).
    // What the first position sends out is not brought in first (OnDeviceAtStepStart): the learned
    // policy may have left it off the device, so its room is not counted as made.
    const bool reconciling = position_ == 0 && reconcile_;
    if (reconciling) {
      reconcile_ = false;
      Add(off_at_start_, ScheduledMove::Kind::kEvict, &adherence_.evict_bytes,
          /*maybe_absent=*/true);
      Add(on_at_start_, ScheduledMove::Kind::kPrefetch, &adherence_.prefetch_bytes);
    }
    if (next_entry_ < schedule.size() && schedule[next_entry_].position == position_) {
      const ScheduleEntry& e = schedule[next_entry_];
      Add(e.evict, ScheduledMove::Kind::kEvict, &adherence_.evict_bytes, reconciling);
      Add(e.evict_absent, ScheduledMove::Kind::kEvict, &adherence_.evict_bytes,
          /*maybe_absent=*/true);
      Add(e.discard, ScheduledMove::Kind::kDiscard, &adherence_.discard_bytes, reconciling);
      Add(e.prefetch, ScheduledMove::Kind::kPrefetch, &adherence_.prefetch_bytes);
      Add(e.populate, ScheduledMove::Kind::kPopulate, &adherence_.populate_bytes);
    }
    ++position_;
  }

  void Add(const std::vector<ChunkRange>& ranges, ScheduledMove::Kind kind, uint64_t* bytes,
           bool maybe_absent = false) {
    for (const ChunkRange& r : ranges) {
      ++adherence_.moves_planned;
      const uint64_t id = r.alloc_id < binding_.size() ? binding_[r.alloc_id] : 0;
      const auto size = sizes_.find(id);
      const uint64_t offset = uint64_t{r.first_chunk} * kChunkBytes;
      if (id == 0 || size == sizes_.end() || offset >= size->second) continue;
      // Host and never allocations are not the schedule's to move (as the simulator has it).
      if (!MayPrefetch(id)) continue;
      const uint64_t length = std::min(uint64_t{r.num_chunks} * kChunkBytes, size->second - offset);
      moves_.push_back(ScheduledMove{kind, id, offset, length, maybe_absent});
      ++adherence_.moves_issued;
      // The device bytes of the range's chunks the allocation has (as the simulator counts them).
      const uint32_t end = std::min<uint32_t>(r.first_chunk + r.num_chunks, ChunksOf(size->second));
      for (uint32_t k = r.first_chunk; k < end; ++k) *bytes += ChunkFootprint(size->second, k);
    }
  }

  // Records the rule action for allocation `id` (`w`: its number in the policy, 0 = unknown). A
  // host placement is for the allocation's life (the engine has advised the device); one the
  // device refused makes the allocation a swap one.
  void ApplyRules(uint64_t id, uint64_t w) {
    if (file_.rules.empty() || host_.contains(id)) return;
    WorkloadAllocation a;
    a.id = w;
    a.bytes = sizes_[id];
    a.persistent = w != 0 && w <= file_.persistent;
    if (const auto site = call_sites_.find(id); site != call_sites_.end()) {
      a.call_site = CallSiteName(site->second);
      auto [known, added] = site_modules_.try_emplace(site->second);
      if (added) known->second = modules_(site->second);
      a.modules = known->second;
    }
    RuleAction action = file_.ActionFor(a);
    if (action == RuleAction::kHost && no_host_.contains(id)) action = RuleAction::kSwap;
    if (action == RuleAction::kSwap) {
      pinned_.erase(id);
      return;
    }
    pinned_[id] = action;
    if (action == RuleAction::kHost) {
      host_.insert(id);
      host_pending_.push_back(id);
      ++adherence_.host_placements;
      adherence_.host_bytes += a.bytes;
    }
  }

  void Mismatch(const std::string& what) {
    trial_.Interrupted();
    pending_mark_ = 0;
    aligned_ = false;
    unmatched_events_ = 0;
    adherence_.aligned = false;
    have_moves_ = false;
    moves_.clear();
    ++adherence_.mismatches;
    const bool first = adherence_.mismatches == 1;
    Fallback(first, absl::StrCat(adherence_.path, ": ", what, " (at launch ", position_,
                                 " of the step); the learned policy decides until the step is "
                                 "recognised again"));
  }

  // Records why the learned policy decides; logs it when `log` (one line per kind of reason:
  // a run that keeps leaving the step is counted in the summary, not logged each time).
  void Fallback(bool log, const std::string& reason) {
    if (log && log_) log_(true, reason);
    adherence_.fallback_reason = reason;
  }

  PolicyFile file_;  // set once, at construction or when planned online
  const PolicyLog log_;
  const CallSiteModules modules_;
  std::unique_ptr<EvictionPolicy> learned_;
  StepPredictor* const learned_predictor_;  // learned_'s (MakeLearnedPolicy: it always has one)
  RollingStepHash hash_;
  // Online planning (null planner_: a policy file).
  const StepPlanner planner_;
  const uint64_t budget_bytes_ = 0;
  const bool in_background_ = false;  // plan on a thread of its own (BackgroundPlan)
  BackgroundPlan planning_;           // the planning running there, if any
  size_t planned_launches_ = 0;       // the recording's launches when the latest planning began
  bool recording_ = false;
  uint64_t reordered_at_start_ = 0;  // the learned policy's reordered launches counted so far
  // While recording: launches moved, the steps they moved in, and the step-long stretch of the
  // recording of the latest move (its launches / the step's).
  uint64_t reordered_moved_ = 0;
  int reordered_steps_ = 0;
  uint64_t last_reorder_ = 0;
  RecordedEvents recorded_;
  std::unordered_set<uint64_t> arenas_;            // allocations launches have named chunks of
  std::vector<RecordedAccess> accesses_;           // scratch of Record
  std::vector<uint64_t> whole_ids_, whole_sizes_;  // scratch of WholeLaunchToken
  uint64_t timed_ = 0;                             // kernel times recorded
  uint64_t next_try_ = 0;                          // plan when this many launches are recorded
  int tries_ = 0;
  int plans_ = 0;  // plans made
  bool usable_ = false;
  bool aligned_ = false;
  bool paused_ = false;  // aligned, but the trial lets the learned policy decide this step
  PlanTrial trial_;      // online planning: the plan against the learned policy
  // Online planning: the learned policy's view of arenas kept whole (LearnedView).
  LaunchView learned_view_;
  std::vector<uint64_t> view_ids_, view_sizes_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> whole_arena_pieces_;  // of this launch
  std::unordered_map<uint64_t, uint64_t> learned_arenas_;  // arena -> bytes, chunks given out
  std::vector<uint64_t> piece_forgets_;                    // chunks the engine forgot, not yet told
  uint64_t pending_mark_ = 0;  // the step mark for TakeStepMark (0: none)
  bool logged_binding_ = false;
  std::unordered_map<uint64_t, uint64_t> sizes_;        // live managed allocations: id -> bytes
  std::vector<uint64_t> order_;                         // ids in the order they were made
  std::vector<uint64_t> binding_;                       // policy number -> engine id (0: none)
  std::unordered_map<uint64_t, uint64_t> workload_id_;  // engine id -> policy number
  std::unordered_map<uint64_t, RuleAction> pinned_;     // engine ids a rule keeps from moving
  std::unordered_map<uint64_t, uint64_t> call_sites_;   // engine id -> call site (when known)
  // The modules on each call site's stack, asked of modules_ once per site.
  std::unordered_map<uint64_t, std::vector<std::string>> site_modules_;
  std::unordered_set<uint64_t> host_;     // placed on the host (or to be)
  std::vector<uint64_t> host_pending_;    // of them, not yet taken by the engine
  std::unordered_set<uint64_t> no_host_;  // the device refused to place them
  uint64_t event_in_step_ = 0;
  std::vector<uint64_t> shape_;  // NoteShape's ring (a policy file, until checked_)
  size_t shape_next_ = 0;
  bool checked_ = false;  // CheckFile has run
  // Events since the step was last recognised (a policy file: before it first was).
  uint64_t unmatched_events_ = 0;
  uint64_t position_ = 0;
  size_t next_entry_ = 0;
  uint64_t next_local_ = 0;
  bool have_moves_ = false;
  std::vector<ScheduledMove> moves_;
  // The persistent chunks the plan has off the device when its step begins (set at Align), sent
  // out at the first position followed after the learned policy decided (reconcile_).
  std::vector<ChunkRange> off_at_start_;
  std::vector<ChunkRange> on_at_start_;  // and brought in then (OnDeviceAtStepStart)
  // The launches seen, and the newest launch that used each live allocation (which persistent
  // allocations the step uses).
  uint64_t launches_seen_ = 0;
  absl::flat_hash_map<uint64_t, uint64_t> used_at_;
  bool reconcile_ = false;
  ScheduleAdherence adherence_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakePlannedPolicy(PolicyFile file, std::string path,
                                                  uint64_t budget_bytes, PolicyLog log,
                                                  CallSiteModules modules) {
  return std::make_unique<PlannedPolicy>(std::move(file), std::move(path), budget_bytes,
                                         std::move(log), std::move(modules), "");
}

std::unique_ptr<EvictionPolicy> MakeOnlinePlannedPolicy(uint64_t budget_bytes, PolicyLog log,
                                                        StepPlanner planner, bool in_background) {
  return std::make_unique<PlannedPolicy>(budget_bytes, std::move(log), std::move(planner),
                                         in_background);
}

std::unique_ptr<EvictionPolicy> PlannedPolicyFor(const absl::StatusOr<PolicyFile>& file,
                                                 const std::string& path, uint64_t budget_bytes,
                                                 PolicyLog log, CallSiteModules modules) {
  if (!file.ok()) {
    return std::make_unique<PlannedPolicy>(PolicyFile{}, path, budget_bytes, std::move(log),
                                           nullptr, std::string(file.status().message()));
  }
  return MakePlannedPolicy(*file, path, budget_bytes, std::move(log), std::move(modules));
}

std::unique_ptr<EvictionPolicy> LoadPlannedPolicy(const std::string& path, uint64_t budget_bytes,
                                                  PolicyLog log, CallSiteModules modules) {
  return PlannedPolicyFor(ReadPolicyFile(path), path, budget_bytes, std::move(log),
                          std::move(modules));
}

}  // namespace spillway::policy
