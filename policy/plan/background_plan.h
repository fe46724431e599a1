// Online planning off the launching thread: one planning of a recording, run on a thread of its
// own so that the job's launches (and the engine's lock) do not wait the second or more it takes.
// The launch that completes the recording starts it; later launches poll for the result without
// blocking. The thread blocks every signal (they go to the job's threads, as without spillway),
// is named `spillway-plan`, and touches nothing but the copy of the recording it was given.
#ifndef SPILLWAY_POLICY_PLAN_BACKGROUND_PLAN_H_
#define SPILLWAY_POLICY_PLAN_BACKGROUND_PLAN_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "policy/plan/step_events.h"
#include "policy/plan/step_plan.h"

namespace spillway::policy {

class BackgroundPlan {
 public:
  struct Result {
    absl::StatusOr<StepPlan> plan;
    double seconds = 0;  // the planning's wall time
  };
  struct Shared;  // what the thread writes (the result, under its own mutex); opaque

  BackgroundPlan() = default;
  BackgroundPlan(const BackgroundPlan&) = delete;
  BackgroundPlan& operator=(const BackgroundPlan&) = delete;

  // @brief Starts `planner(events, budget_bytes)` on a new thread. False (nothing started) when
  // one is running already or no thread could be made: the caller then plans on its own thread.
  bool Start(StepPlanner planner, RecordedEvents events, uint64_t budget_bytes);

  // @brief Whether a planning was started and its result not yet taken. After a fork the child
  // has no planning thread: a planning its parent started is dropped there (false).
  bool running();

  // @brief Forgets a planning started (its thread finishes on its own; its result is dropped).
  void Drop() { shared_.reset(); }

  // @brief The result once the thread has finished (and then not running() any more), else
  // nullopt. Never blocks.
  std::optional<Result> Take();

 private:
  std::shared_ptr<Shared> shared_;
  pid_t started_in_ = 0;  // the process that started the thread
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLAN_BACKGROUND_PLAN_H_
