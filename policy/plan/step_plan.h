// What online planning makes of a recording: a step plan, and the planner's type (the interposer
// passes PlanRecordedSteps, policy/planner/online_plan.h; tests may pass their own). Shared by the
// policy that follows plans (planned_policy.h) and the thread that makes them (background_plan.h).
#ifndef SPILLWAY_POLICY_PLAN_STEP_PLAN_H_
#define SPILLWAY_POLICY_PLAN_STEP_PLAN_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "policy/plan/policy_file.h"
#include "policy/plan/step_events.h"

namespace spillway::policy {

// Plans a step from what the job did (a recording of its allocations, frees and launches with
// kernel times) for a device budget: the policy file to follow and one line for people.
struct StepPlan {
  PolicyFile file;
  std::string description;  // what was planned and what it predicts, for the log
};
using StepPlanner =
    std::function<absl::StatusOr<StepPlan>(const RecordedEvents& events, uint64_t budget_bytes)>;

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLAN_STEP_PLAN_H_
