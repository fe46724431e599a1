// Online planning's planner: the one spillway-plan runs, run inside the job on the steps the
// engine recorded (MakeOnlinePlannedPolicy, policy/plan/planned_policy.h). From the recording to
// the workload of one step (policy/plan/step_events.h), then PlanPolicy for the budget with the
// default cost model and every search but host placement (which needs call-site rules and a device
// that maps host memory; a policy file can still ask for it), within a bound on the searches.
// Planning runs on a thread of its own (policy/plan/background_plan.h) or, inline, in a launch of
// the job under the engine's lock. So it must not drive a ResidencyEngine (SimulateEngine,
// SimulateEngineFollowing): inline, that engine would reuse the thread-local scratch of the launch
// being planned.
#ifndef SPILLWAY_POLICY_PLANNER_ONLINE_PLAN_H_
#define SPILLWAY_POLICY_PLANNER_ONLINE_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "policy/plan/planned_policy.h"
#include "policy/plan/step_events.h"

namespace spillway::policy {

// The bound on the planner's searches inside the job (PlanOptions::max_search_launches): the
// whole search for train_like's 74-launch step (48840 launches simulated, 0.16 s), about 1 s on
// the development container's core for a step of any size (about 11 µs a launch simulated on the
// synthetic transformer's step).
inline constexpr uint64_t kOnlineSearchLaunches = 100000;

// Errors: the recording holds no whole repeating step, or the planner refused it.
absl::StatusOr<StepPlan> PlanRecordedSteps(const RecordedEvents& events, uint64_t budget_bytes);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLANNER_ONLINE_PLAN_H_
