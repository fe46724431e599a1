// Online planning's trial of a plan against the learned policy: is following the plan faster on
// this device than letting the learned policy decide? The plan's prediction comes from a model of
// the device; the trial measures. The plan is followed until its step times have settled, then
// the learned policy decides until its have, and whichever had the lower median over its last
// kTimedSteps steps goes on (a tie keeps the plan). A phase has settled when its last kTimedSteps
// times lie within kSettled of each other: a policy can take a few steps to reach its own pace
// from the other's residency (the learned policy took three when it lost its step at the switch;
// it is kept warm now, policy/plan/planned_policy.cc). The first step of each phase, which starts
// from the other's residency, is not counted; nor is a step the job left (Interrupted). A phase
// ends unsettled after kMaxPhaseSteps steps, and with fewer than kTimedSteps times the trial ends
// with the plan kept, as without a trial. Step times are the engine's step marks
// (TimeObserver::TakeStepMark, ObserveStepTime): each step the trial times gets a tag, and a
// step's time arrives some launches after it ends.
#ifndef SPILLWAY_POLICY_PLAN_PLAN_TRIAL_H_
#define SPILLWAY_POLICY_PLAN_PLAN_TRIAL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace spillway::policy {

class PlanTrial {
 public:
  enum class State { kNone, kFollowing, kLearning, kKept, kRejected };
  static constexpr size_t kTimedSteps = 3;  // per phase
  static constexpr double kSettled = 0.03;  // the largest of them at most 3% over the least
  static constexpr int kMaxPhaseSteps = 24;
  // Steps whose times are awaited at most: a job that runs further ahead of the device loses them.
  static constexpr size_t kMaxAwaited = 32;

  // @brief A new plan to try (any trial before is forgotten): the plan is followed first.
  void Start();
  // @brief The plan is dropped before its verdict (the job's step changed): no trial.
  void Stop();
  // @brief A step of the planned shape begins. Moves the trial on (to the learned phase, or to the
  // verdict) and returns the tag of the step mark to take at it, 0 when the step is not timed.
  uint64_t StepStarts();
  // @brief The job left the planned step: the step under way is no whole step of its phase, and
  // the next one to start (when the step is recognised again) starts from the learned policy's
  // residency.
  void Interrupted();
  // @brief The step begun at mark `tag` took `seconds`.
  void StepTime(uint64_t tag, double seconds);

  State state() const { return state_; }
  bool running() const { return state_ == State::kFollowing || state_ == State::kLearning; }
  // The median step times of the phases' last kTimedSteps steps, seconds (0 while a phase has
  // none).
  double plan_seconds() const { return Median(plan_); }
  double learned_seconds() const { return Median(learned_); }
  // @brief One line on the verdict, for the log (once the state is kKept or kRejected).
  std::string Verdict() const;

 private:
  struct Marked {
    uint64_t tag = 0;
    bool plan = false;     // the step followed the plan
    bool counted = false;  // a whole step of its phase, not its first
  };
  static double Median(const std::vector<double>& times);
  // Whether both phases have kTimedSteps times: a verdict by time, not by default.
  bool Timed() const { return plan_.size() >= kTimedSteps && learned_.size() >= kTimedSteps; }
  // Whether a phase with `times` is over after phase_steps_ steps.
  bool PhaseOver(const std::vector<double>& times) const;
  void Decide();

  State state_ = State::kNone;
  uint64_t tag_ = 0;           // the last tag given (tags count up over all trials)
  int phase_steps_ = 0;        // steps begun in this phase
  bool next_counted_ = false;  // the next step to begin counts (not the phase's first)
  std::deque<Marked> marked_;  // steps whose times have not arrived, oldest first
  std::vector<double> plan_, learned_;
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLAN_PLAN_TRIAL_H_
