// From a recorded trace (docs/trace-format.md) to the workload model the planner and the
// simulator read (policy/plan/workload_model.h): finds the repeating training step in the trace's
// allocations, frees and launches, and describes its last whole repetition. Allocations live at
// the step's start are the persistent ones; each launch touches the 2 MiB chunks of the parts of
// allocations its access set names, and takes its compute time from the trace's kernel times
// (0 when the trace has none). A pointer into an arena (docs/engine.md), recorded as the range to
// the allocation's end, is taken to end at the next offset pointers into it were seen at, as the
// engine names it. Events are compared the way the engine recognises a step
// (policy/plan/step_signature.h), so a policy planned from the trace is one the engine can follow.
#ifndef SPILLWAY_POLICY_PLANNER_TRACE_WORKLOAD_H_
#define SPILLWAY_POLICY_PLANNER_TRACE_WORKLOAD_H_

#include <string>

#include "absl/status/statusor.h"
#include "policy/plan/workload_model.h"

namespace spillway::policy {

// Reads the trace at `path`. Errors name the file: it cannot be read, it is cut short (no end
// record), an allocation is over kMaxAllocationBytes (naming the record), it has no repeating
// step (at least two whole repetitions are needed), or the step found does not pair its
// allocations and frees. `warning`, when given, gets one line when the recorder dropped records
// (the end record counts them), else "".
//
// `place`, when given, gets where that step lies in the trace's launches (what `spillway inspect`
// and `spillway report` show as the step, so they name the step `spillway plan` plans).
struct TraceStepPlace {
  uint64_t launches_per_step = 0;
  uint64_t events_per_step = 0;  // allocations, frees and launches
  uint64_t first_launch = 0;  // index (among the trace's launches) of the first whole step's first
  uint64_t steps = 0;         // whole steps from there on that repeat the one described
};
absl::StatusOr<Workload> WorkloadFromTrace(const std::string& path, std::string* warning = nullptr,
                                           TraceStepPlace* place = nullptr);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLANNER_TRACE_WORKLOAD_H_
