// Tests of the exit summary lines (launcher/summary.h): fields read defensively, lines as the
// bash launcher printed them.
#include "launcher/summary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace spillway::launcher {
namespace {

using Lines = std::vector<std::string>;

TEST(SummaryLinesTest, NoCallsNoLines) {
  EXPECT_FALSE(SummaryLines(R"({"pid":1,"calls":{},"errors":[]})"));
  EXPECT_FALSE(SummaryLines(R"({"pid":1,"errors":[]})"));
  EXPECT_FALSE(SummaryLines("not json"));
  EXPECT_FALSE(SummaryLines(R"({"pid":1,"calls":{"cuInit":1})"));  // cut short
}

TEST(SummaryLinesTest, UnknownFieldsAndEscapes) {
  const auto lines = SummaryLines(
      R"({"version":"9","pid":4242,"future":{"x":[1,{"y":"a\"b"}]},"calls":{"cuInit":1},)"
      R"("allocations":{"bytes_peak":3221225472},"engine":{"policy":"learned","evict_bytes":1048576},)"
      R"("errors":["cuMemPrefetchAsync: \"bad\" value","second"]})");
  ASSERT_TRUE(lines);
  EXPECT_EQ(*lines, (Lines{"spillway: pid 4242: policy learned, budget ?, peak 3.00 GiB, "
                           "prefetched ?, evicted 1.0 MiB, 2 errors",
                           R"(spillway:   first error: cuMemPrefetchAsync: \"bad\" value)"}));
}

TEST(SummaryLinesTest, OneErrorAndMissingErrors) {
  auto lines = SummaryLines(R"({"pid":3,"calls":{"a":1},"errors":["x"]})");
  ASSERT_TRUE(lines);
  EXPECT_EQ((*lines)[0],
            "spillway: pid 3: policy ?, budget ?, peak ?, prefetched ?, evicted ?, "
            "1 error");
  lines = SummaryLines(R"({"calls":{"a":1}})");
  ASSERT_TRUE(lines);
  EXPECT_EQ((*lines)[0],
            "spillway: pid ?: policy ?, budget ?, peak ?, prefetched ?, evicted ?, "
            "? errors");
}

TEST(SummaryLinesTest, OnlinePlanTrial) {
  const auto lines = SummaryLines(
      R"({"pid":7,"calls":{"cuInit":1},"engine":{"policy":"learned","policy_file":)"
      R"({"path":"online plan","steps_followed":15,"mismatches":1,"trial":"rejected",)"
      R"("trial_plan_step_ms":412.2754,"trial_learned_step_ms":398.4229}},"errors":[]})");
  ASSERT_TRUE(lines);
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[1],
            "spillway:   online plan: 15 steps followed, 1 mismatch; rejected after its trial (a "
            "step 412.275 ms following it, 398.423 ms with the learned policy)");
}

TEST(SummaryLinesTest, PlanNeverMadeHasNoLine) {
  const auto lines = SummaryLines(
      R"({"pid":8,"calls":{"cuInit":1},"engine":{"policy":"learned","policy_file":)"
      R"({"path":"online plan","steps_followed":0,"mismatches":0,"trial":""}},"errors":[]})");
  ASSERT_TRUE(lines);
  EXPECT_EQ(lines->size(), 1u);
}

TEST(SummaryLinesTest, PolicyFileStillOnTrial) {
  const auto lines = SummaryLines(
      R"({"pid":8,"calls":{"cuInit":1},"engine":{"policy_file":)"
      R"({"path":"/p.toml","steps_followed":2,"mismatches":3,"trial":"running"}},"errors":[]})");
  ASSERT_TRUE(lines);
  EXPECT_EQ(lines->back(),
            "spillway:   /p.toml: 2 steps followed, 3 mismatches; still on trial at exit");
}

TEST(SummaryLinesTest, ThreadStepsAndReorderedLaunches) {
  const auto lines = SummaryLines(
      R"({"pid":9,"calls":{"cuInit":1},"engine":{"thread_steps":2,"reordered_launches":1}})");
  ASSERT_TRUE(lines);
  ASSERT_EQ(lines->size(), 3u);
  EXPECT_EQ((*lines)[1],
            "spillway:   learned: each launching thread's own step (2 threads; their launches "
            "interleave, so the job as a whole repeats no step)");
  EXPECT_EQ((*lines)[2],
            "spillway:   learned: the job's launch order changes from step to step (1 launch at "
            "another place than in the step before); its step is learned all the same");
}

TEST(SummarySizeTest, Units) {
  EXPECT_EQ(SummarySize(512), "512 B");
  EXPECT_EQ(SummarySize(2560), "2.5 KiB");
  EXPECT_EQ(SummarySize(64.0 * 1024 * 1024), "64.0 MiB");
  EXPECT_EQ(SummarySize(3221225472.0), "3.00 GiB");
}

TEST(MatchesPidPatternTest, PidStandsForAnyText) {
  EXPECT_TRUE(MatchesPidPattern("summary-%p.json", "summary-123.json"));
  EXPECT_FALSE(MatchesPidPattern("summary-%p.json", "summary-123.json.tmp"));
  EXPECT_FALSE(MatchesPidPattern("summary-%p.json", "other-1.json"));
  EXPECT_TRUE(MatchesPidPattern("s.json", "s.json"));
  EXPECT_FALSE(MatchesPidPattern("s.json", "s.json2"));
  EXPECT_TRUE(MatchesPidPattern("a%pb%pc", "a1b2c"));
  EXPECT_FALSE(MatchesPidPattern("ab%pba", "aba"));
}

}  // namespace
}  // namespace spillway::launcher
