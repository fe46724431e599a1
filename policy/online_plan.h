// Online planning's planner: the one spillway-plan runs, run inside the job on the steps the
// engine recorded (MakeOnlinePlannedPolicy, policy/planned_policy.h). From the recording to the
// workload of one step (policy/step_events.h), then PlanPolicy for the budget with the default
// cost model and every search but host placement (which needs call-site rules and a device that
// maps host memory; a policy file can still ask for it).
#ifndef SPILLWAY_POLICY_ONLINE_PLAN_H_
#define SPILLWAY_POLICY_ONLINE_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "policy/planned_policy.h"
#include "policy/step_events.h"

namespace spillway::policy {

// Errors: the recording holds no whole repeating step, or the planner refused it.
absl::StatusOr<StepPlan> PlanRecordedSteps(const RecordedEvents& events, uint64_t budget_bytes);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ONLINE_PLAN_H_
