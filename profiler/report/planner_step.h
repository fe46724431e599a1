// The training step `spillway inspect` and `spillway report` show: the one `spillway plan` plans
// (policy/planner/trace_workload.h's step finder over allocations, frees and launches), so the
// tools never disagree about whether a trace has a step. Where that finder finds none, the
// launch-sequence finder of trace_analysis.h stands (it also accepts a launch order that changes
// from step to step, which a plan cannot follow).
#ifndef SPILLWAY_PROFILER_REPORT_PLANNER_STEP_H_
#define SPILLWAY_PROFILER_REPORT_PLANNER_STEP_H_

#include <string>

#include "profiler/report/trace_analysis.h"
#include "profiler/report/trace_model.h"

namespace spillway::report {

// Replaces `analysis->step` with the planner's step of the trace at `path` (the file `model` was
// loaded from) when that finder finds one; thread steps are then dropped, as Analyze drops them
// for a found step.
void UsePlannersStep(const std::string& path, const TraceModel& model, Analysis* analysis);

}  // namespace spillway::report

#endif  // SPILLWAY_PROFILER_REPORT_PLANNER_STEP_H_
