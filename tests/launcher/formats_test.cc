// Tests of the launcher's small formats and helpers: the progress line's units, spillway-wait's
// status line, signal names, dirname, the usage error text.
#include <gtest/gtest.h>
#include <signal.h>

#include "launcher/job_runner.h"
#include "launcher/paths.h"
#include "launcher/progress.h"
#include "launcher/usage.h"

namespace spillway::launcher {
namespace {

TEST(ProgressTest, HumanDuration) {
  EXPECT_EQ(HumanDuration(5), "5s");
  EXPECT_EQ(HumanDuration(72), "1m12s");
  EXPECT_EQ(HumanDuration(3700), "1h01m");
}

TEST(ProgressTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(999), "999 B");
  EXPECT_EQ(HumanBytes(1500), "1 kB");
  EXPECT_EQ(HumanBytes(845123456), "845 MB");
  EXPECT_EQ(HumanBytes(1500000000), "1.5 GB");
}

TEST(JobEndTest, ParsesStatusLine) {
  auto end = ParseJobEnd("exit 143\n");
  ASSERT_TRUE(end);
  EXPECT_FALSE(end->signaled);
  EXPECT_EQ(end->number, 143);
  end = ParseJobEnd("signal 9");
  ASSERT_TRUE(end);
  EXPECT_TRUE(end->signaled);
  EXPECT_EQ(end->number, 9);
  EXPECT_FALSE(ParseJobEnd(""));
  EXPECT_FALSE(ParseJobEnd("exit"));
  EXPECT_FALSE(ParseJobEnd("exit -1"));
  EXPECT_FALSE(ParseJobEnd("quit 3"));
}

TEST(SignalNameTest, AsKillListsThem) {
  EXPECT_EQ(SignalName(SIGKILL), "KILL");
  EXPECT_EQ(SignalName(SIGTERM), "TERM");
  EXPECT_EQ(SignalName(SIGRTMIN), "RTMIN");
  EXPECT_EQ(SignalName(SIGRTMIN + 2), "RTMIN+2");
  EXPECT_EQ(SignalName(SIGRTMAX - 1), "RTMAX-1");
}

TEST(PathsTest, Dirname) {
  EXPECT_EQ(Dirname("a"), ".");
  EXPECT_EQ(Dirname("/a"), "/");
  EXPECT_EQ(Dirname("/a/b/"), "/a");
  EXPECT_EQ(Dirname("a/b"), "a");
  EXPECT_EQ(AbsolutePath("/x/y"), "/x/y");
}

TEST(UsageTest, ErrorText) {
  EXPECT_EQ(UsageErrorText("run: missing command to run", Command::kRun),
            "spillway: run: missing command to run\n(spillway run --help lists its options)\n");
  EXPECT_EQ(UsageErrorText("unknown command 'x'", Command::kMain),
            "spillway: unknown command 'x'\n(spillway --help lists the commands)\n");
  EXPECT_EQ(UsageText(Command::kDoctor).rfind("usage: spillway doctor", 0), 0u);
}

}  // namespace
}  // namespace spillway::launcher
