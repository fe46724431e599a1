// PlanTrial: the phases of a plan's trial, its step marks and its verdict.
#include "policy/plan/plan_trial.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace spillway::policy {

void PlanTrial::Start() {
  state_ = State::kFollowing;
  ++tag_;  // no step of an earlier trial pairs with this one's first
  phase_steps_ = 0;
  next_counted_ = false;
  marked_.clear();
  plan_.clear();
  learned_.clear();
}

void PlanTrial::Stop() {
  state_ = State::kNone;
  ++tag_;
  marked_.clear();
}

uint64_t PlanTrial::StepStarts() {
  if (!running()) return 0;
  if (state_ == State::kFollowing && PhaseOver(plan_)) {
    if (plan_.size() < kTimedSteps) {
      Decide();
      return 0;
    }
    state_ = State::kLearning;
    phase_steps_ = 0;
    next_counted_ = false;
  } else if (state_ == State::kLearning && PhaseOver(learned_)) {
    Decide();
    return 0;
  }
  ++phase_steps_;
  marked_.push_back(Marked{++tag_, state_ == State::kFollowing, next_counted_});
  next_counted_ = true;
  // Times arrive in order, as late as the job runs ahead of the device; a step whose mark was lost
  // never gets one.
  while (marked_.size() > kMaxAwaited) marked_.pop_front();
  return tag_;
}

void PlanTrial::Interrupted() {
  if (!running()) return;
  if (!marked_.empty()) marked_.back().counted = false;
  ++tag_;  // the next mark pairs with no earlier one
  next_counted_ = false;
}

void PlanTrial::StepTime(uint64_t tag, double seconds) {
  while (!marked_.empty() && marked_.front().tag < tag) marked_.pop_front();
  if (marked_.empty() || marked_.front().tag != tag) return;
  const Marked step = marked_.front();
  marked_.pop_front();
  if (!step.counted || !running() || seconds <= 0) return;
  (step.plan ? plan_ : learned_).push_back(seconds);
}

bool PlanTrial::PhaseOver(const std::vector<double>& times) const {
  if (phase_steps_ >= kMaxPhaseSteps) return true;
  if (times.size() < kTimedSteps) return false;
  const auto [least, most] = std::minmax_element(times.end() - kTimedSteps, times.end());
  return *most <= *least * (1 + kSettled);
}

double PlanTrial::Median(const std::vector<double>& times) {
  if (times.empty()) return 0;
  std::vector<double> sorted(times.end() - std::min(times.size(), kTimedSteps), times.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

void PlanTrial::Decide() {
  state_ = !Timed() || plan_seconds() <= learned_seconds() ? State::kKept : State::kRejected;
  marked_.clear();
}

std::string PlanTrial::Verdict() const {
  if (!Timed()) {
    return absl::StrFormat(
        "online plan: no step times to compare the plan with the learned policy by (%zu and %zu "
        "of %zu steps timed); following the plan",
        plan_.size(), learned_.size(), kTimedSteps);
  }
  return absl::StrFormat(
      "online plan: a step took %.3f ms following the plan, %.3f ms with the learned policy "
      "deciding (medians of their last %zu steps); %s",
      plan_seconds() * 1e3, learned_seconds() * 1e3, kTimedSteps,
      state_ == State::kKept ? "following the plan" : "the learned policy decides from now on");
}

}  // namespace spillway::policy
