// The training-like workload (examples/train_like.cc) end to end on simgpu under the residency
// engine, for each eviction policy: at 2x, 4x and 8x oversubscription it gives the same checksum
// as an unconstrained run (a big simulated device, no shim), while without the shim it stops with
// out-of-memory. The same comparison covers data surviving many eviction rounds, the update kernel
// that reads its gradient through a pointer stored in device memory, several threads allocating,
// freeing and launching at once, and a fork after init. The learned policy's online planning is
// followed on the same job with the same checksum, replicas on their own threads are learned
// thread by thread, and the `none` policy pages as plain managed memory does.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/subprocess.h"

namespace spillway::testing {
namespace {

const std::string kOut = SPILLWAY_TEST_OUT_DIR;
// The simulated device of the constrained runs; the unconstrained one has 1 GiB.
const char kDeviceMemory[] = "16MiB";

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid()) + ".json";
}

// The value of the final "checksum 0x..." line of the workload's output, or "".
std::string Checksum(const std::string& output) {
  const std::string key = "\nchecksum 0x";
  const size_t at = output.rfind(key);
  if (at == std::string::npos) return "";
  return output.substr(at + 1, key.size() - 1 + 16);
}

// 12 layers per unit of oversubscription: every tensor is then about 1/36 of the device (under
// 0.5 MiB), so one kernel's tensors span a few of the device's 2 MiB chunks, as in a real job.
// (A kernel whose tensors span more chunks than the device holds thrashes on simgpu.)
std::vector<std::string> Job(double factor, int steps, const std::vector<std::string>& extra) {
  std::vector<std::string> job = {kOut + "/train_like",
                                  "--oversubscription",
                                  std::to_string(factor),
                                  "--layers",
                                  std::to_string(static_cast<int>(12 * factor)),
                                  "--steps",
                                  std::to_string(steps)};
  job.insert(job.end(), extra.begin(), extra.end());
  return job;
}

// The checksum of the job on a device big enough for it (no shim, no eviction), sized as if the
// device had kDeviceMemory. Cached: every policy compares against the same run.
std::string UnconstrainedChecksum(double factor, int steps, const std::vector<std::string>& extra) {
  static std::map<std::vector<std::string>, std::string> cache;
  std::vector<std::string> job = Job(factor, steps, extra);
  job.push_back("--memory");
  job.push_back(kDeviceMemory);
  const auto found = cache.find(job);
  if (found != cache.end()) return found->second;
  const ProcessResult result =
      RunProcess(job, {{"LD_LIBRARY_PATH", kOut + "/simgpu"}, {"SIMGPU_MEMORY", "1GiB"}});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const std::string checksum = Checksum(result.output);
  EXPECT_FALSE(checksum.empty()) << result.output;
  cache[job] = checksum;
  return checksum;
}

struct ShimRun {
  ProcessResult result;
  std::string summary;  // the exit summary JSON
  std::string stats;    // simgpu's stats JSON
};

// Runs `job` on the kDeviceMemory device under the shim, with the default policy (`learned`) and
// `env` added: its output and exit summary (no stats).
ShimRun RunLearned(const std::vector<std::string>& job, std::map<std::string, std::string> env) {
  const std::string summary_path = TempPath("train_like_learned_summary");
  env.insert({{"LD_LIBRARY_PATH", kOut + "/simgpu"},
              {"SIMGPU_MEMORY", kDeviceMemory},
              {"LD_PRELOAD", kOut + "/libspillway.so"},
              {"SPILLWAY_SUMMARY", summary_path}});
  ShimRun run;
  run.result = RunProcess(job, env);
  run.summary = ReadFile(summary_path);
  std::remove(summary_path.c_str());
  return run;
}

class TrainLikeTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Runs the job on the kDeviceMemory device under the shim with this test's eviction policy.
  ShimRun RunUnderShim(double factor, int steps, const std::vector<std::string>& extra = {}) {
    const std::string summary_path = TempPath("train_like_summary");
    const std::string stats_path = TempPath("train_like_stats");
    ShimRun run;
    run.result = RunProcess(Job(factor, steps, extra), {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                                        {"SIMGPU_MEMORY", kDeviceMemory},
                                                        {"LD_PRELOAD", kOut + "/libspillway.so"},
                                                        {"SPILLWAY_EVICTION", GetParam()},
                                                        {"SPILLWAY_SUMMARY", summary_path},
                                                        {"SIMGPU_STATS", stats_path}});
    run.summary = ReadFile(summary_path);
    run.stats = ReadFile(stats_path);
    std::remove(summary_path.c_str());
    std::remove(stats_path.c_str());
    return run;
  }

  // The run finished, gave the unconstrained run's checksum, and the engine had no errors.
  void ExpectSameResultAsUnconstrained(const ShimRun& run, double factor, int steps,
                                       const std::vector<std::string>& extra = {}) {
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    EXPECT_EQ(Checksum(run.result.output), UnconstrainedChecksum(factor, steps, extra))
        << run.result.output;
    EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
    EXPECT_NE(run.summary.find("\"policy\":\"" + GetParam() + "\""), std::string::npos)
        << run.summary;
    EXPECT_EQ(JsonInt(run.stats, "overcommit_faults"), 0) << run.stats;
  }
};

TEST_P(TrainLikeTest, OversubscribedRunsMatchTheUnconstrainedRun) {
  for (const double factor : {2.0, 4.0, 8.0}) {
    SCOPED_TRACE("oversubscription " + std::to_string(factor));
    const int steps = factor < 8 ? 3 : 2;  // 8x: 128 MiB a step on the host, keep it short
    const ShimRun run = RunUnderShim(factor, steps);
    ExpectSameResultAsUnconstrained(run, factor, steps);
    // It really was oversubscribed: more managed memory than the device, data sent back to the
    // host.
    EXPECT_GT(JsonInt(run.stats, "managed_alloc_bytes_peak"), (16ll << 20) * factor * 0.9)
        << run.stats;
    EXPECT_GT(JsonInt(run.stats, "evicted_bytes"), 0) << run.stats;
  }
}

// Without the shim (so for no policy) the same job does not fit.
TEST(TrainLike, WithoutTheShimItRunsOutOfMemoryAt2x) {
  const ProcessResult plain = RunProcess(
      Job(2.0, 3, {}), {{"LD_LIBRARY_PATH", kOut + "/simgpu"}, {"SIMGPU_MEMORY", kDeviceMemory}});
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_NE(plain.output.find("out of memory: "), std::string::npos) << plain.output;
}

// Weights are written at init and by every step's update; at 4x with 6 steps each of them leaves
// the device and comes back many times (evictions far exceed the working set) and must still be
// bit-exact at the end.
TEST_P(TrainLikeTest, DataSurvivesManyEvictionRounds) {
  const ShimRun run = RunUnderShim(4.0, 6);
  ExpectSameResultAsUnconstrained(run, 4.0, 6);
  const long long working_set = 4ll * (16 << 20);
  EXPECT_GT(JsonInt(run.stats, "evicted_bytes"), 4 * working_set) << run.stats;
}

// tl_update reads its gradient through a pointer table in device memory, never a parameter: the
// engine cannot see that access, so the gradient arena must be correct wherever it lives when
// the update runs (demand paging covers what the engine missed). One stream, many layers: the
// arena (24 interior slices, 1.3x the device) does not fit.
TEST_P(TrainLikeTest, KernelReachingMemoryThroughADevicePointerGetsCorrectData) {
  const std::vector<std::string> extra = {"--layers", "24", "--streams", "1", "--alloc", "sync"};
  const ShimRun run = RunUnderShim(4.0, 3, extra);
  ExpectSameResultAsUnconstrained(run, 4.0, 3, extra);
  // Every launch (24 layers x 3 kernels + fill + loss per step, 24 fills at init) was resolved.
  EXPECT_EQ(JsonInt(run.summary, "launches_resolved"), 24 + 3 * (24 * 3 + 2)) << run.summary;
}

// Four replicas on four threads, each with its own streams, allocating, freeing and launching at
// the same time through the shim.
TEST_P(TrainLikeTest, ConcurrentThreadsAllocateFreeAndLaunch) {
  const std::vector<std::string> extra = {"--threads", "4", "--layers", "12", "--alloc", "mixed"};
  const ShimRun run = RunUnderShim(4.0, 3, extra);
  // Moves are issued outside the engine's lock, so another thread may free a victim first; such a
  // move is not an error (the summary's `errors` must stay empty).
  ExpectSameResultAsUnconstrained(run, 4.0, 3, extra);
  EXPECT_NE(run.result.output.find("replica 3 checksum"), std::string::npos) << run.result.output;
}

// Two replicas on their own threads launch at once, their launches interleaved differently every
// step: the learned policy finds no step in the whole sequence and learns each thread's own (the
// summary's thread_steps), the online plan says why there is none, and the results are the
// unconstrained run's. The threads take turns in a drawn order (--interleave shuffled): left to
// the host's scheduler, a loaded host can run one replica's whole step before the other's, and
// such a job repeats as a whole (and is rightly decided by the whole sequence).
TEST(TrainLike, ReplicasOnTheirOwnThreadsAreLearnedThreadByThread) {
  const std::vector<std::string> extra = {"--threads", "2", "--interleave", "shuffled"};
  const ShimRun shim = RunLearned(Job(2.0, 8, extra), {{"SPILLWAY_LOG", "info"}});
  const ProcessResult& run = shim.result;
  const std::string& summary = shim.summary;
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(Checksum(run.output), UnconstrainedChecksum(2.0, 8, extra)) << run.output;
  EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;
  EXPECT_EQ(JsonInt(summary, "step_length"), 0) << summary;
  EXPECT_EQ(JsonInt(summary, "thread_steps"), 2) << summary;
  EXPECT_NE(run.output.find("the learned policy decides from each thread's own step"),
            std::string::npos)
      << run.output;
  EXPECT_NE(summary.find("\"fallback_reason\":\"no plan: the job's threads launch at once"),
            std::string::npos)
      << summary;
}

// simgpu runs a kernel's body as soon as its stream reaches it, so a discard of the engine's that
// lacks its wait for a kernel on another stream would almost always land after it anyway. With
// each kernel held 300 us first (SIMGPU_HOLD_KERNEL_US), as a GPU computes for a while, such a
// discard overtakes it and the results differ from the unconstrained run's. (A prefetch or
// eviction lacking its wait keeps the data on simgpu, as migration does on a GPU: only its cost
// would show.)
TEST(TrainLike, ResultsHoldWhenKernelsTakeTimeToRun) {
  const ShimRun shim = RunLearned(Job(2.0, 4, {}), {{"SIMGPU_HOLD_KERNEL_US", "300"}});
  ASSERT_EQ(shim.result.exit_code, 0) << shim.result.output;
  EXPECT_EQ(Checksum(shim.result.output), UnconstrainedChecksum(2.0, 4, {})) << shim.result.output;
  EXPECT_NE(shim.summary.find("\"errors\":[]"), std::string::npos) << shim.summary;
}

// The weight updates launched in an order that changes every step (--reorder, as TensorFlow's
// executor launches the ops that are ready at once): the results are those of the job in its
// usual order, and the learned policy still finds its step: it predicts every step's launches
// within their moves (the summary's reordered_launches), and the online plan, which a step in a
// changing order cannot be followed by, says so on an info line, not as a warning. Two such
// replicas on their own threads give their results too, each thread's own step learned.
TEST(TrainLike, LaunchesInAnOrderThatChangesEveryStepKeepTheLearnedStep) {
  const std::vector<std::string> reorder = {"--reorder"};
  EXPECT_EQ(UnconstrainedChecksum(2.0, 8, reorder), UnconstrainedChecksum(2.0, 8, {}));
  const ShimRun shim = RunLearned(Job(2.0, 8, reorder), {{"SPILLWAY_LOG", "info"}});
  const ProcessResult& run = shim.result;
  const std::string& summary = shim.summary;
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(Checksum(run.output), UnconstrainedChecksum(2.0, 8, reorder)) << run.output;
  EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;
  constexpr int kStep = 3 * 24 + 2;  // forward, backward and update per layer; fill, loss
  EXPECT_EQ(JsonInt(summary, "step_length"), kStep) << summary;
  EXPECT_GE(JsonInt(summary, "predicted_launches"), 5 * kStep) << summary;
  EXPECT_GT(JsonInt(summary, "reordered_launches"), 0) << summary;
  EXPECT_NE(run.output.find("online plan: none; the job launches its kernels in an order that "
                            "changes from step to step"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("warning"), std::string::npos) << run.output;
  EXPECT_NE(summary.find("\"fallback_reason\":\"no plan: the job launches its kernels in an order"),
            std::string::npos)
      << summary;

  // Two such replicas on their own threads: each thread's own step, through its changing order.
  const std::vector<std::string> both = {"--reorder", "--threads", "2", "--interleave", "shuffled"};
  const ShimRun replicas = RunLearned(Job(2.0, 8, both), {});
  ASSERT_EQ(replicas.result.exit_code, 0) << replicas.result.output;
  EXPECT_EQ(Checksum(replicas.result.output), UnconstrainedChecksum(2.0, 8, both))
      << replicas.result.output;
  EXPECT_NE(replicas.summary.find("\"errors\":[]"), std::string::npos) << replicas.summary;
  EXPECT_EQ(JsonInt(replicas.summary, "thread_steps"), 2) << replicas.summary;
}

// After init and a step the job forks; the child does host-only work and exits, the parent goes
// on oversubscribed to the same result.
TEST_P(TrainLikeTest, ForkAfterInit) {
  const ShimRun run = RunUnderShim(2.0, 3, {"--fork-after-step", "1"});
  EXPECT_NE(run.result.output.find("fork after step 1: the child exited cleanly"),
            std::string::npos)
      << run.result.output;
  ExpectSameResultAsUnconstrained(run, 2.0, 3);
}

// The learned policy plans the step it detects, inside the job (SPILLWAY_ONLINE_PLAN), and
// follows the plan from a later step: at 2x and 4x over 8 steps, planned in the launch that
// completes the recording (`inline`, so that the plan is there from the next step whatever the
// host's load), the exit summary's policy_file is the online plan, followed for at least two whole
// steps with every planned move issued and no mismatch, and the checksum is the unconstrained
// run's. With SPILLWAY_ONLINE_PLAN=0 the learned policy decides alone (no policy_file in the
// summary). Planning on its own thread (the default) is the trial's test below.
TEST(TrainLike, LearnedPlansTheDetectedStepOnlineAndFollowsIt) {
  for (const double factor : {2.0, 4.0}) {
    for (const std::string online : {"inline", "0"}) {
      SCOPED_TRACE("oversubscription " + std::to_string(factor) + ", online plan " + online);
      const ShimRun shim = RunLearned(Job(factor, 8, {}), {{"SPILLWAY_ONLINE_PLAN", online}});
      const ProcessResult& run = shim.result;
      const std::string& summary = shim.summary;
      ASSERT_EQ(run.exit_code, 0) << run.output;
      EXPECT_EQ(Checksum(run.output), UnconstrainedChecksum(factor, 8, {})) << run.output;
      EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;
      EXPECT_NE(summary.find("\"policy\":\"learned\""), std::string::npos) << summary;
      if (online == "0") {
        EXPECT_EQ(summary.find("\"policy_file\""), std::string::npos) << summary;
        continue;
      }
      EXPECT_NE(summary.find("\"path\":\"online plan\""), std::string::npos) << summary;
      EXPECT_GE(JsonInt(summary, "steps_followed"), 2) << summary;
      EXPECT_EQ(JsonInt(summary, "mismatches"), 0) << summary;
      EXPECT_GT(JsonInt(summary, "moves_issued"), 0) << summary;
      EXPECT_EQ(JsonInt(summary, "moves_issued"), JsonInt(summary, "moves_planned")) << summary;
    }
  }
}

// The online plan's trial (docs/engine.md, "Online planning"): at 2x the plan is followed, then
// the learned policy decides, then the faster goes on. 64 steps leave room for both phases to run
// their longest (PlanTrial::kMaxPhaseSteps): on a slow host (the sanitizer build) the learned
// policy's step times take longer to settle. The trial reaches its verdict with both medians
// measured, the verdict is the faster one's, and switching between the two leaves the job's
// results as they are. The plan is made on a thread of its own (the default), while the job's
// launches go on.
TEST(TrainLike, TheOnlinePlanIsTriedAgainstTheLearnedPolicyWithoutChangingResults) {
  const ShimRun shim = RunLearned(Job(2.0, 64, {}), {{"SPILLWAY_LOG", "info"}});
  const ProcessResult& run = shim.result;
  const std::string& summary = shim.summary;
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(" on its own thread, from "), std::string::npos) << run.output;
  EXPECT_EQ(Checksum(run.output), UnconstrainedChecksum(2.0, 64, {})) << run.output;
  EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;
  const auto number = [&summary](const std::string& key) {
    const std::string quoted = "\"" + key + "\":";
    const size_t at = summary.find(quoted);
    return at == std::string::npos ? -1.0
                                   : std::strtod(summary.c_str() + at + quoted.size(), nullptr);
  };
  const double plan_ms = number("trial_plan_step_ms"), learned_ms = number("trial_learned_step_ms");
  EXPECT_GT(plan_ms, 0) << summary;
  EXPECT_GT(learned_ms, 0) << summary;
  const bool kept = summary.find("\"trial\":\"kept\"") != std::string::npos;
  const bool rejected = summary.find("\"trial\":\"rejected\"") != std::string::npos;
  ASSERT_TRUE(kept || rejected) << summary;
  EXPECT_EQ(kept, plan_ms <= learned_ms) << summary;
  EXPECT_NE(
      run.output.find(kept ? "; following the plan" : "; the learned policy decides from now on"),
      std::string::npos)
      << run.output;
}

// A job that never waits for the device (stream-ordered allocations, no synchronization in the
// step) runs only as far ahead as the launch queue holds (simgpu: SIMGPU_QUEUE_DEPTH, 1024 a
// stream, as on a GPU), so its kernels are timed while it runs and its step is planned too.
TEST(TrainLike, LearnedPlansAJobThatNeverWaitsOnline) {
  const std::vector<std::string> async = {"--alloc", "async"};
  // Planned inline: on a loaded host (the sanitizer build) a plan made on its own thread can come
  // after the job's 14 steps.
  const ShimRun shim = RunLearned(Job(2.0, 14, async), {{"SPILLWAY_ONLINE_PLAN", "inline"}});
  const ProcessResult& run = shim.result;
  const std::string& summary = shim.summary;
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(Checksum(run.output), UnconstrainedChecksum(2.0, 14, async)) << run.output;
  EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"path\":\"online plan\""), std::string::npos) << summary;
  EXPECT_GE(JsonInt(summary, "steps_followed"), 2) << summary;
  EXPECT_EQ(JsonInt(summary, "mismatches"), 0) << summary;
}

// SPILLWAY_EVICTION=none: spillway backs the allocations with managed memory and moves nothing,
// so at 2x the job pages on demand as it does when it allocates managed memory itself
// (--managed, no shim): the same checksum, no prefetch, the same demand faults within 5% (they
// vary by about 2% from run to run). With --alloc sync: stream-ordered allocations would come
// from spillway's managed pool, whose rounding differs from --managed's cuMemAllocManaged.
TEST(TrainLike, NoneLeavesPagingToTheDeviceLikePlainManagedMemory) {
  std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                            {"SIMGPU_MEMORY", kDeviceMemory},
                                            {"SIMGPU_STATS", TempPath("train_like_plain_stats")}};
  const std::vector<std::string> sync = {"--alloc", "sync"};
  std::vector<std::string> managed = sync;
  managed.push_back("--managed");
  const ProcessResult plain = RunProcess(Job(2.0, 3, managed), env);
  const std::string plain_stats = ReadFile(env["SIMGPU_STATS"]);
  env["SIMGPU_STATS"] = TempPath("train_like_none_stats");
  env["SPILLWAY_SUMMARY"] = TempPath("train_like_none_summary");
  env["LD_PRELOAD"] = kOut + "/libspillway.so";
  env["SPILLWAY_EVICTION"] = "none";
  const ProcessResult none = RunProcess(Job(2.0, 3, sync), env);
  const std::string stats = ReadFile(env["SIMGPU_STATS"]);
  const std::string summary = ReadFile(env["SPILLWAY_SUMMARY"]);
  std::remove(env["SIMGPU_STATS"].c_str());
  std::remove(env["SPILLWAY_SUMMARY"].c_str());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_EQ(Checksum(none.output), UnconstrainedChecksum(2.0, 3, sync)) << none.output;
  EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"policy\":\"none\""), std::string::npos) << summary;
  for (const char* key : {"prefetch_bytes", "evict_bytes", "discard_bytes"}) {
    EXPECT_EQ(JsonInt(summary, key, "engine"), 0) << key << ": " << summary;
  }
  EXPECT_EQ(JsonInt(stats, "prefetched_bytes"), 0) << stats;
  const long long faults = JsonInt(stats, "count", "demand_faults");
  const long long plain_faults = JsonInt(plain_stats, "count", "demand_faults");
  EXPECT_GT(plain_faults, 0) << plain_stats;
  EXPECT_NEAR(faults, plain_faults, plain_faults / 20) << stats << "\n" << plain_stats;
}

INSTANTIATE_TEST_SUITE_P(Policies, TrainLikeTest, ::testing::Values("lru", "learned"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace spillway::testing
