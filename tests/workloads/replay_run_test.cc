// spillway-replay end to end on simgpu: a small synthetic training job (replay_test_trace.h) of
// 42 MiB at its peak,
// written as a trace, replayed under spillway with each eviction policy at 2x and 4x
// oversubscription (SIMGPU_MEMORY = the trace's peak / 2 and / 4), with the last recorded step
// repeated. Each run must give the digest of the run without spillway on a device big enough,
// with no error in spillway's summary; so must the arena and plain managed allocations. A byte
// inverted behind the replayer's back changes the digest (the verification can fail), and a
// trace that cannot be replayed is one line.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/subprocess.h"
#include "tests/workloads/replay_test_trace.h"

namespace spillway::testing {
namespace {

const std::string kOut = SPILLWAY_TEST_OUT_DIR;
constexpr int kSteps = 5;  // the trace's 4, then its last again

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/replay_run_test_" + name + "." + std::to_string(::getpid());
}

// The test job: 2 MiB tensors (simgpu's and the engine's granule), of which the ops touch the
// first 256 KiB (each fresh page touched costs the host a page fault).
replay::testing::TestTraceOptions Job() {
  replay::testing::TestTraceOptions options;
  options.touch_bytes = 256 << 10;
  return options;
}

// The test job's trace (written once) and its peak.
const std::string& TracePath() {
  static const std::string path = [] {
    const std::string p = TempPath("job.trace");
    EXPECT_TRUE(replay::testing::WriteTestTrace(p, Job()).ok());
    return p;
  }();
  return path;
}
uint64_t Peak() { return replay::testing::TestTracePeakBytes(Job()); }

// The value of the "digest 0x..." line, or "".
std::string Digest(const std::string& output) {
  const size_t at = output.rfind("digest 0x");
  return at == std::string::npos ? "" : output.substr(at + 7, 18);
}

std::vector<std::string> Replay(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {kOut + "/spillway-replay", TracePath(), "--steps",
                                   std::to_string(kSteps)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// The digest of the job on a big simulated device, without spillway (cached by options).
std::string ReferenceDigest(const std::vector<std::string>& extra) {
  static std::map<std::vector<std::string>, std::string> cache;
  const auto found = cache.find(extra);
  if (found != cache.end()) return found->second;
  const ProcessResult run =
      RunProcess(Replay(extra), {{"LD_LIBRARY_PATH", kOut + "/simgpu"}, {"SIMGPU_MEMORY", "1GiB"}});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  const std::string digest = Digest(run.output);
  EXPECT_FALSE(digest.empty()) << run.output;
  return cache[extra] = digest;
}

struct ShimRun {
  ProcessResult result;
  std::string summary;  // spillway's exit summary
  std::string stats;    // simgpu's stats
};

// Runs the replay under spillway (as `spillway run` preloads it) on a device of peak / factor.
ShimRun RunUnderSpillway(const std::string& policy, double factor,
                         const std::vector<std::string>& extra) {
  const std::string summary = TempPath("summary.json");
  const std::string stats = TempPath("stats.json");
  const uint64_t memory = static_cast<uint64_t>(static_cast<double>(Peak()) / factor);
  ShimRun run;
  run.result = RunProcess(Replay(extra), {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                          {"SIMGPU_MEMORY", std::to_string(memory)},
                                          {"LD_PRELOAD", kOut + "/libspillway.so"},
                                          {"SPILLWAY_EVICTION", policy},
                                          {"SPILLWAY_SUMMARY", summary},
                                          {"SIMGPU_STATS", stats}});
  run.summary = ReadFile(summary);
  run.stats = ReadFile(stats);
  std::remove(summary.c_str());
  std::remove(stats.c_str());
  return run;
}

void ExpectVerified(const ShimRun& run, const std::vector<std::string>& extra) {
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_EQ(Digest(run.result.output), ReferenceDigest(extra)) << run.result.output;
  EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
  // It was oversubscribed: data went back to the host.
  EXPECT_GT(JsonInt(run.stats, "evicted_bytes"), 0) << run.stats;
}

class ReplayPolicyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReplayPolicyTest, EveryByteSurvives2xAnd4x) {
  const std::vector<std::string> extra = {"--touch", "all"};
  for (const double factor : {2.0, 4.0}) {
    SCOPED_TRACE("oversubscription " + std::to_string(factor));
    const ShimRun run = RunUnderSpillway(GetParam(), factor, extra);
    ExpectVerified(run, extra);
    EXPECT_NE(run.summary.find("\"policy\":\"" + GetParam() + "\""), std::string::npos)
        << run.summary;
    EXPECT_NE(run.result.output.find("step 5: "), std::string::npos) << run.result.output;
    EXPECT_NE(run.result.output.find("(recorded step 4 again)"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, ReplayPolicyTest, ::testing::Values("learned", "lru", "none"));

TEST(ReplayRun, ArenaAndManagedAllocationsGiveTheSameDigest) {
  // The digest does not depend on how tensors are allocated.
  EXPECT_EQ(ReferenceDigest({"--alloc", "arena"}), ReferenceDigest({}));
  const ShimRun arena = RunUnderSpillway("learned", 2.0, {"--alloc", "arena"});
  ExpectVerified(arena, {});
  EXPECT_NE(arena.result.output.find("arena segments"), std::string::npos);
  // Plain managed memory, no spillway: simgpu pages it on demand.
  const ProcessResult managed = RunProcess(
      Replay({"--alloc", "managed"}),
      {{"LD_LIBRARY_PATH", kOut + "/simgpu"}, {"SIMGPU_MEMORY", std::to_string(Peak() / 2)}});
  ASSERT_EQ(managed.exit_code, 0) << managed.output;
  EXPECT_EQ(Digest(managed.output), ReferenceDigest({}));
}

TEST(ReplayRun, WithoutSpillwayTheJobDoesNotFitAt2x) {
  const ProcessResult run = RunProcess(Replay({}), {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                                    {"SIMGPU_MEMORY", std::to_string(Peak() / 2)}});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("cuMemAllocAsync of 2.00 MiB: CUDA_ERROR_OUT_OF_MEMORY"),
            std::string::npos)
      << run.output;
}

TEST(ReplayRun, AnInvertedByteChangesTheDigest) {
  // Launch 60 is in step 2 (step 1 has 40): an op whose output later ops read.
  const std::vector<std::string> flip = {"--flip-after-launch", "60"};
  const ProcessResult plain =
      RunProcess(Replay(flip), {{"LD_LIBRARY_PATH", kOut + "/simgpu"}, {"SIMGPU_MEMORY", "1GiB"}});
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("test: inverted the byte at offset"), std::string::npos);
  EXPECT_NE(Digest(plain.output), ReferenceDigest({}));
  const ShimRun shim = RunUnderSpillway("learned", 2.0, flip);
  ASSERT_EQ(shim.result.exit_code, 0) << shim.result.output;
  EXPECT_NE(Digest(shim.result.output), ReferenceDigest({}));
  // The same corruption gives the same (wrong) digest with and without spillway.
  EXPECT_EQ(Digest(shim.result.output), Digest(plain.output));
}

TEST(ReplayRun, JsonIsOneLineOfResults) {
  const ProcessResult run =
      RunProcess(Replay({"--json", "--warmup", "3"}),
                 {{"LD_LIBRARY_PATH", kOut + "/simgpu"}, {"SIMGPU_MEMORY", "1GiB"}});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.output.find('\n'), run.output.size() - 1) << run.output;
  EXPECT_EQ(JsonInt(run.output, "steps"), kSteps);
  EXPECT_EQ(JsonInt(run.output, "warmup"), 3);
  EXPECT_EQ(JsonInt(run.output, "peak_live_bytes"), static_cast<long long>(Peak()));
  EXPECT_NE(run.output.find("\"digest\":\"" + ReferenceDigest({})), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("\"step_ms\":["), std::string::npos);
}

TEST(ReplayRun, ATraceThatCannotBeReplayedIsOneLine) {
  const ProcessResult missing = RunProcess({kOut + "/spillway-replay", TempPath("none.trace")},
                                           {{"LD_LIBRARY_PATH", kOut + "/simgpu"}});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(std::count(missing.output.begin(), missing.output.end(), '\n'), 1) << missing.output;
  EXPECT_NE(missing.output.find("spillway-replay: " + TempPath("none.trace")), std::string::npos)
      << missing.output;

  replay::testing::TestTraceOptions differs;
  differs.last_step_differs = true;
  const std::string path = TempPath("differs.trace");
  ASSERT_TRUE(replay::testing::WriteTestTrace(path, differs).ok());
  const ProcessResult run = RunProcess({kOut + "/spillway-replay", path, "--steps", "6"},
                                       {{"LD_LIBRARY_PATH", kOut + "/simgpu"}});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
  EXPECT_NE(run.output.find("its last two steps differ"), std::string::npos) << run.output;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace spillway::testing
