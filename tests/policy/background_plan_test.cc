// Online planning on a thread of its own (policy/plan/background_plan.h): the caller never waits
// for the planner, the thread blocks every signal without changing the caller's mask, one planning
// runs at a time, a dropped one is forgotten, and a forked child holds none of its parent's.
#include "policy/plan/background_plan.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

// A planner that says it started (on which thread, with which signals blocked), then waits for
// `release` before it gives a plan whose description is the recording's launches.
struct BlockingPlanner {
  absl::Notification started, release;
  std::thread::id thread;
  bool blocks_sigint = false, blocks_sigterm = false;

  StepPlanner Planner() {
    return [this](const RecordedEvents& events, uint64_t budget) -> absl::StatusOr<StepPlan> {
      thread = std::this_thread::get_id();
      sigset_t mask;
      pthread_sigmask(SIG_BLOCK, nullptr, &mask);
      blocks_sigint = sigismember(&mask, SIGINT) == 1;
      blocks_sigterm = sigismember(&mask, SIGTERM) == 1;
      started.Notify();
      release.WaitForNotification();
      StepPlan plan;
      plan.description =
          std::to_string(events.launches()) + " launches, " + std::to_string(budget) + " bytes";
      return plan;
    };
  }
};

RecordedEvents ThreeLaunches() {
  RecordedEvents events;
  events.Allocated(1, 4096, 0);
  for (int i = 0; i < 3; ++i) events.Launched("k", i + 1, {RecordedAccess{1, 0, 0}});
  return events;
}

// Polls `plan` until its result comes (the thread stores it just after the planner returns).
BackgroundPlan::Result Await(BackgroundPlan* plan) {
  for (int i = 0; i < 10000; ++i) {
    if (std::optional<BackgroundPlan::Result> result = plan->Take()) return *std::move(result);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ADD_FAILURE() << "no result after 10 s";
  return {absl::DeadlineExceededError("none"), 0};
}

TEST(BackgroundPlan, ThePlannerRunsOnItsOwnThreadWithSignalsBlockedWhileTheCallerGoesOn) {
  BlockingPlanner planner;
  BackgroundPlan plan;
  sigset_t before, after;
  pthread_sigmask(SIG_BLOCK, nullptr, &before);
  ASSERT_TRUE(plan.Start(planner.Planner(), ThreeLaunches(), 1 << 20));
  pthread_sigmask(SIG_BLOCK, nullptr, &after);
  EXPECT_EQ(sigismember(&after, SIGINT), sigismember(&before, SIGINT));  // the caller's mask
  planner.started.WaitForNotification();
  // The planner is blocked: the caller is not, and no result is there yet.
  EXPECT_TRUE(plan.running());
  EXPECT_FALSE(plan.Take().has_value());
  // One planning at a time.
  EXPECT_FALSE(plan.Start(planner.Planner(), ThreeLaunches(), 1 << 20));
  EXPECT_NE(planner.thread, std::this_thread::get_id());
  EXPECT_TRUE(planner.blocks_sigint);
  EXPECT_TRUE(planner.blocks_sigterm);
  planner.release.Notify();
  const BackgroundPlan::Result result = Await(&plan);
  ASSERT_TRUE(result.plan.ok()) << result.plan.status();
  EXPECT_EQ(result.plan->description, "3 launches, 1048576 bytes");  // its own copy, planned
  EXPECT_GE(result.seconds, 0);
  EXPECT_FALSE(plan.running());  // taken
  EXPECT_FALSE(plan.Take().has_value());
}

TEST(BackgroundPlan, ADroppedPlanningIsForgottenAndANewOneCanStart) {
  BlockingPlanner first;
  BackgroundPlan plan;
  ASSERT_TRUE(plan.Start(first.Planner(), ThreeLaunches(), 1));
  first.started.WaitForNotification();
  plan.Drop();
  EXPECT_FALSE(plan.running());
  first.release.Notify();  // it finishes on its own; nobody takes its result
  BlockingPlanner second;
  second.release.Notify();
  ASSERT_TRUE(plan.Start(second.Planner(), RecordedEvents{}, 2));
  const BackgroundPlan::Result result = Await(&plan);
  ASSERT_TRUE(result.plan.ok());
  EXPECT_EQ(result.plan->description, "0 launches, 2 bytes");
}

// A child forked while the parent plans has no planning thread: it holds no planning (and never
// waits for one), and can start its own; the parent's planning goes on.
TEST(BackgroundPlan, AForkedChildHoldsNoneOfItsParentsPlanning) {
  BlockingPlanner planner;
  BackgroundPlan plan;
  ASSERT_TRUE(plan.Start(planner.Planner(), ThreeLaunches(), 1));
  planner.started.WaitForNotification();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int status = 0;
    if (plan.running()) status |= 1;
    if (plan.Take().has_value()) status |= 2;
    BlockingPlanner own;
    own.release.Notify();
    if (!plan.Start(own.Planner(), RecordedEvents{}, 5)) status |= 4;
    BackgroundPlan::Result result{absl::UnknownError("none"), 0};
    for (int i = 0; i < 10000; ++i) {
      if (std::optional<BackgroundPlan::Result> r = plan.Take()) {
        result = *std::move(r);
        break;
      }
      usleep(1000);
    }
    if (!result.plan.ok() || result.plan->description != "0 launches, 5 bytes") status |= 8;
    _exit(status);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(plan.running());
  planner.release.Notify();
  EXPECT_TRUE(Await(&plan).plan.ok());
}

}  // namespace
}  // namespace spillway::policy
