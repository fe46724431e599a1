// A job's allocations, frees and launches as the step finder reads them — from a recorded trace
// (policy/planner/trace_workload.h) or recorded in memory by the engine's online planning
// (policy/plan/planned_policy.h) — and from them to the workload model of one training step: finds
// the repeating step by the engine's event tokens, picks the step boundary with the fewest live
// allocations, and describes the last whole repetition. Allocations live at the step's start are
// the persistent ones; each launch touches the 2 MiB chunks of the parts of allocations its
// accesses name, and takes its compute time from the kernel times recorded (the least over the
// repetitions; for a launch never timed, the least time of the same kernel in them; else 0). A
// pointer into an arena (docs/engine.md), recorded as the range to the allocation's end, is taken
// to end at the next offset pointers into it were seen at, as the engine names it. Events are
// compared the way the engine recognises a step (policy/plan/step_signature.h), so a policy planned
// from them is one the engine can follow.
#ifndef SPILLWAY_POLICY_PLAN_STEP_EVENTS_H_
#define SPILLWAY_POLICY_PLAN_STEP_EVENTS_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/plan/workload_model.h"

namespace spillway::policy {

struct RecordedAllocation {
  uint64_t bytes = 0;
  uint64_t call_site = 0;
  std::vector<uint64_t> offsets;  // where launches' pointers into it point, sorted, distinct
};

struct RecordedAccess {
  uint64_t alloc = 0;  // the allocation's id in the recording
  uint64_t offset = 0;
  uint64_t bytes = 0;  // 0: the whole allocation
};

struct RecordedEvent {
  StepEvent::Kind kind = StepEvent::Kind::kLaunch;
  uint64_t alloc = 0;  // kAlloc, kFree
  std::string kernel;
  uint64_t correlation = 0;  // kLaunch: the key of its kernel time
  std::vector<RecordedAccess> accesses;
  uint64_t token = 0;  // the engine's event token (step_signature.h)
};

struct RecordedEvents {
  std::unordered_map<uint64_t, RecordedAllocation> allocations;
  // The module paths on each call site's stack, innermost first, each once.
  std::unordered_map<uint64_t, std::vector<std::string>> site_modules;
  std::vector<RecordedEvent> events;
  std::unordered_map<uint64_t, double> kernel_seconds;  // by correlation

  // Appending events. An allocation id is never reused; frees and accesses of ids never allocated
  // are dropped (false).
  void Allocated(uint64_t id, uint64_t bytes, uint64_t call_site);
  bool Freed(uint64_t id);
  // `accesses` in parameter order; an allocation may appear more than once (several pointers).
  void Launched(std::string kernel, uint64_t correlation,
                const std::vector<RecordedAccess>& accesses);
  size_t launches() const { return launches_; }

 private:
  size_t launches_ = 0;
};

// True for WorkloadFromEvents' error when the events hold no two whole repetitions of a step (as
// opposed to a step found that cannot be planned): more events may yet show one.
bool IsNoRepeatingStep(const absl::Status& status);

// Where the step found lies in the events (indices into RecordedEvents::events).
struct StepPlace {
  size_t events_per_step = 0;
  size_t first =
      0;           // the first event of the repetitions (the first whole step starts here or later)
  size_t end = 0;  // one past their last event
  size_t start = 0;  // the step boundary picked (the fewest live allocations): the step described
                     // is [start, start + events_per_step)
};

// The step of `events`; `source` names them in errors and in the workload's description ("a
// trace path"). Errors: no repeating step (at least two whole repetitions are needed), or the step
// found does not pair its allocations and frees. `place`, when given, gets where the step lies.
absl::StatusOr<Workload> WorkloadFromEvents(const RecordedEvents& events, const std::string& source,
                                            StepPlace* place = nullptr);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLAN_STEP_EVENTS_H_
