// How far a launch may move from its place one training step earlier and still count as the same
// launch of the step: where an executor launches the ops that are ready at once (TensorFlow in
// graph mode), the order of independent launches changes from step to step. The learned policy
// (policy/engine/learned_policy.cc) and `spillway inspect`'s step finder (profiler/report) use the
// same.
#ifndef SPILLWAY_COMMON_STEP_SLACK_H_
#define SPILLWAY_COMMON_STEP_SLACK_H_

#include <algorithm>
#include <cstdint>

namespace spillway {

inline constexpr uint64_t kStepSlack = 8;  // launches

// The slack for a step of `period` launches: a quarter of the step for steps shorter than 32
// launches, so that a short loop's launches are not paired within one step.
constexpr uint64_t StepSlack(uint64_t period) { return std::min(kStepSlack, period / 4); }

}  // namespace spillway

#endif  // SPILLWAY_COMMON_STEP_SLACK_H_
