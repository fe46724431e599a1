// The planner's step in the report tools (see planner_step.h).
#include "profiler/report/planner_step.h"

#include <algorithm>
#include <vector>

#include "policy/trace_workload.h"

namespace spillway::report {

Step StepAt(const TraceModel& model, uint64_t first_launch, uint64_t launches_per_step,
            uint64_t steps) {
  Step step;
  const uint64_t n = model.launches.size();
  if (launches_per_step == 0 || steps < 2 || first_launch + steps * launches_per_step > n) {
    return step;
  }
  std::vector<uint64_t> durations;
  for (uint64_t k = 0; k + 1 < steps; ++k) {
    const uint64_t t0 = model.launches[first_launch + k * launches_per_step].time_ns;
    const uint64_t t1 = model.launches[first_launch + (k + 1) * launches_per_step].time_ns;
    durations.push_back(t1 > t0 ? t1 - t0 : 0);
  }
  std::nth_element(durations.begin(), durations.begin() + durations.size() / 2, durations.end());
  step.found = true;
  step.launches_per_step = launches_per_step;
  step.steps = steps;
  step.first_launch = first_launch;
  step.median_step_ns = durations[durations.size() / 2];
  const uint64_t first_time = model.launches[first_launch].time_ns;
  step.warmup_ns = first_time > model.header.start_ns ? first_time - model.header.start_ns : 0;
  step.in_steps_fraction = static_cast<double>(steps * launches_per_step) / static_cast<double>(n);
  return step;
}

void UsePlannersStep(const std::string& path, const TraceModel& model, Analysis* analysis) {
  policy::TraceStepPlace place;
  if (!policy::WorkloadFromTrace(path, nullptr, &place).ok()) return;
  Step step = StepAt(model, place.first_launch, place.launches_per_step, place.steps);
  if (!step.found) return;
  analysis->step = step;
  analysis->thread_steps.clear();
}

}  // namespace spillway::report
