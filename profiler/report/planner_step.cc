// The planner's step in the report tools (see planner_step.h).
#include "profiler/report/planner_step.h"

#include "policy/planner/trace_workload.h"

namespace spillway::report {

void UsePlannersStep(const std::string& path, const TraceModel& model, Analysis* analysis) {
  policy::TraceStepPlace place;
  if (!policy::WorkloadFromTrace(path, nullptr, &place).ok()) return;
  Step step = StepOver(model.launches, model.header.start_ns, place.first_launch,
                       place.launches_per_step, place.steps);
  if (!step.found) return;
  analysis->step = step;
  analysis->thread_steps.clear();
}

}  // namespace spillway::report
