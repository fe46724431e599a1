// PlanTrial (policy/plan/plan_trial.h): the plan followed until its step times settle, then the
// learned policy until its do, and the faster going on; the first step of each phase and a step the
// job left are not counted, and a trial without times keeps the plan.
#include "policy/plan/plan_trial.h"

#include <functional>
#include <vector>

#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

using State = PlanTrial::State;

// Drives a trial as the planned policy and the engine do: each step starts (taking its mark), and
// the time of the step before arrives during the next one. `plan_ms(i)` / `learned_ms(i)` give
// the i-th step of each phase its time. Returns the steps run until the verdict (at most 100).
int RunTrial(PlanTrial* trial, const std::function<double(int)>& plan_ms,
             const std::function<double(int)>& learned_ms) {
  uint64_t pending = 0;  // the mark of the step under way
  double pending_ms = 0;
  int plan_steps = 0, learned_steps = 0, steps = 0;
  trial->Start();
  while (trial->running() && steps < 100) {
    const uint64_t tag = trial->StepStarts();
    if (pending != 0) trial->StepTime(pending, pending_ms * 1e-3);
    if (!trial->running()) break;
    pending = tag;
    pending_ms =
        trial->state() == State::kFollowing ? plan_ms(plan_steps++) : learned_ms(learned_steps++);
    ++steps;
  }
  return steps;
}

TEST(PlanTrial, APlanFasterThanTheLearnedPolicyIsKept) {
  PlanTrial trial;
  EXPECT_EQ(trial.state(), State::kNone);
  EXPECT_EQ(trial.StepStarts(), 0u);  // no trial: no marks
  // The first step of each phase (from the other's residency) would swing the verdict.
  const int steps = RunTrial(
      &trial, [](int i) { return i == 0 ? 9.0 : 5.0; }, [](int i) { return i == 0 ? 1.0 : 6.0; });
  EXPECT_EQ(trial.state(), State::kKept);
  EXPECT_DOUBLE_EQ(trial.plan_seconds(), 5e-3);
  EXPECT_DOUBLE_EQ(trial.learned_seconds(), 6e-3);
  // 1 + 3 steps following, the fourth's time arriving in the next; the same learning.
  EXPECT_EQ(steps, 10);
  EXPECT_EQ(trial.Verdict(),
            "online plan: a step took 5.000 ms following the plan, 6.000 ms with the learned "
            "policy deciding (medians of their last 3 steps); following the plan");
  EXPECT_EQ(trial.StepStarts(), 0u);
}

TEST(PlanTrial, APlanSlowerThanTheLearnedPolicyIsRejected) {
  PlanTrial trial;
  RunTrial(
      &trial, [](int) { return 4.12; }, [](int) { return 3.98; });
  EXPECT_EQ(trial.state(), State::kRejected);
  EXPECT_NE(trial.Verdict().find("the learned policy decides from now on"), std::string::npos)
      << trial.Verdict();
  // A tie keeps the plan.
  RunTrial(
      &trial, [](int) { return 4.0; }, [](int) { return 4.0; });
  EXPECT_EQ(trial.state(), State::kKept);
}

// The learned policy finds the step again some steps after the plan: its phase lasts until its
// last three times are within 3%, and only those count.
TEST(PlanTrial, TheLearnedPhaseWaitsForItsTimesToSettle) {
  PlanTrial trial;
  const std::vector<double> learned = {10.4, 9.45, 7.0, 5.75, 5.8, 5.75, 1.0};
  const int steps = RunTrial(
      &trial, [](int) { return 5.47; }, [&](int i) { return learned[static_cast<size_t>(i)]; });
  EXPECT_EQ(trial.state(), State::kKept);
  EXPECT_DOUBLE_EQ(trial.learned_seconds(), 5.75e-3);
  EXPECT_EQ(steps, 5 + 7);

  // Times that never settle end the phase after kMaxPhaseSteps steps, judged by the last three.
  RunTrial(
      &trial, [](int) { return 5.0; }, [](int i) { return i % 2 == 0 ? 4.0 : 4.5; });
  EXPECT_EQ(trial.state(), State::kRejected);
  EXPECT_DOUBLE_EQ(trial.learned_seconds(), 4e-3);  // of 4.0, 4.5, 4.0
}

// A plan dropped before its verdict (the job's step changed) ends its trial: no marks, and a
// late time of its steps counts for nothing, in the next trial either.
TEST(PlanTrial, AStoppedTrialTakesNoMoreTimes) {
  PlanTrial trial;
  trial.Start();
  trial.StepStarts();
  const uint64_t tag = trial.StepStarts();
  trial.Stop();
  EXPECT_FALSE(trial.running());
  EXPECT_EQ(trial.state(), State::kNone);
  EXPECT_EQ(trial.StepStarts(), 0u);
  trial.StepTime(tag, 5e-3);
  EXPECT_EQ(trial.plan_seconds(), 0);
  trial.Start();
  EXPECT_GT(trial.StepStarts(), tag + 1);  // no mark pairs with the stopped trial's
  trial.StepTime(tag, 5e-3);
  EXPECT_EQ(trial.plan_seconds(), 0);
}

TEST(PlanTrial, WithoutStepTimesThePlanIsKept) {
  PlanTrial trial;
  trial.Start();
  int steps = 0;
  while (trial.running() && steps < 100) {
    trial.StepStarts();  // the engine never delivers a time
    ++steps;
  }
  EXPECT_EQ(trial.state(), State::kKept);
  EXPECT_EQ(steps, PlanTrial::kMaxPhaseSteps + 1);
  EXPECT_NE(trial.Verdict().find("no step times"), std::string::npos) << trial.Verdict();
}

// A step the job left is not counted, nor the first step after it is recognised again; a time
// for a mark the trial no longer waits for is ignored.
TEST(PlanTrial, AStepTheJobLeftIsNotCounted) {
  PlanTrial trial;
  trial.Start();
  uint64_t tag = trial.StepStarts();  // the phase's first
  trial.StepTime(tag, 9e-3);
  tag = trial.StepStarts();
  trial.StepTime(tag - 1, 1e-3);  // unknown: its time came already
  trial.StepTime(tag, 5e-3);
  tag = trial.StepStarts();
  trial.Interrupted();
  trial.StepTime(tag, 50e-3);  // the step left
  tag = trial.StepStarts();    // recognised again: the first after it
  trial.StepTime(tag, 60e-3);
  for (int i = 0; i < 2; ++i) {
    tag = trial.StepStarts();
    trial.StepTime(tag, 5e-3);
  }
  EXPECT_EQ(trial.state(), State::kFollowing);
  trial.StepStarts();  // three plan times, settled: the learned policy's turn
  EXPECT_EQ(trial.state(), State::kLearning);
  EXPECT_DOUBLE_EQ(trial.plan_seconds(), 5e-3);
}

}  // namespace
}  // namespace spillway::policy
