// Online planning's planner (see online_plan.h).
#include "policy/planner/online_plan.h"

#include "absl/strings/str_format.h"
#include "policy/planner/planner.h"
#include "policy/planner/simulator.h"

namespace spillway::policy {

absl::StatusOr<StepPlan> PlanRecordedSteps(const RecordedEvents& events, uint64_t budget_bytes) {
  absl::StatusOr<Workload> w = WorkloadFromEvents(events, "the recorded steps");
  if (!w.ok()) return w.status();
  PlanOptions options;
  options.sim.device_memory = budget_bytes;
  options.place_on_host = false;
  options.max_search_launches = kOnlineSearchLaunches;
  PlanChoices choices;
  absl::StatusOr<PolicyFile> file = PlanPolicy(*w, options, &choices);
  if (!file.ok()) return file.status();
  const SimResult predicted = SimulatePlanned(*w, *file, options.sim);
  StepPlan plan;
  plan.description = absl::StrFormat(
      "planned the job's step (%zu launches, %zu allocations, %.1f MiB live at most) for %.1f "
      "MiB: predicted %.3f ms and %.1f MiB moved per step",
      w->num_launches(), w->allocations.size(), static_cast<double>(w->peak_live_bytes()) / 1048576,
      static_cast<double>(budget_bytes) / 1048576, predicted.step_seconds * 1e3,
      static_cast<double>(predicted.bytes_moved()) / 1048576);
  if (choices.search_cut) {
    plan.description += absl::StrFormat(" (search cut at %llu launches simulated)",
                                        static_cast<unsigned long long>(choices.searched_launches));
  }
  plan.file = *std::move(file);
  plan.file.model = "online plan";
  return plan;
}

}  // namespace spillway::policy
