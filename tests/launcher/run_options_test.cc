// Tests of `spillway run` and `spillway profile` option parsing (launcher/run_options.h): values,
// the job's first word ending the options, and the errors in the bash launcher's words.
#include "launcher/run_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace spillway::launcher {
namespace {

using Args = std::vector<std::string>;

TEST(ParseRunOptionsTest, ValuesAndJob) {
  const RunParse parse = ParseRunOptions({"--summary", "s.json", "--mode=record", "-q", "--ballast",
                                          "--log", "debug", "--", "-c", "--mode", "x"},
                                         "run");
  ASSERT_EQ(parse.error, "");
  EXPECT_EQ(parse.options.summary, "s.json");
  EXPECT_EQ(parse.options.mode, "record");
  EXPECT_EQ(parse.options.log, "debug");
  EXPECT_TRUE(parse.options.quiet);
  EXPECT_TRUE(parse.options.ballast);
  EXPECT_EQ(parse.options.job, (Args{"-c", "--mode", "x"}));
}

TEST(ParseRunOptionsTest, JobStartsAtFirstWord) {
  const RunParse parse = ParseRunOptions({"--simgpu", "env", "--summary", "x"}, "run");
  ASSERT_EQ(parse.error, "");
  EXPECT_TRUE(parse.options.simgpu);
  EXPECT_EQ(parse.options.job, (Args{"env", "--summary", "x"}));
}

TEST(ParseRunOptionsTest, HelpAndVersionStopReading) {
  EXPECT_TRUE(ParseRunOptions({"--help", "--bogus"}, "run").options.help);
  EXPECT_TRUE(ParseRunOptions({"--version"}, "run").options.version);
  EXPECT_EQ(ParseRunOptions({"--bogus", "--help"}, "run").error, "run: unknown option '--bogus'");
}

TEST(ParseRunOptionsTest, Errors) {
  EXPECT_EQ(ParseRunOptions({}, "run").error, "run: missing command to run");
  EXPECT_EQ(ParseRunOptions({"--summary", "/tmp/x"}, "run").error, "run: missing command to run");
  EXPECT_EQ(ParseRunOptions({"-c", "true"}, "run").error, "run: unknown option '-c'");
  EXPECT_EQ(ParseRunOptions({"--eviction"}, "run").error, "option --eviction needs a value");
  EXPECT_EQ(ParseRunOptions({"--mode", "turbo", "true"}, "run").error,
            "run: bad --mode 'turbo' (expected run, record or off)");
  EXPECT_EQ(ParseRunOptions({"--log", "loud", "true"}, "profile").error,
            "profile: bad --log 'loud' (expected error, warn, info or debug)");
  EXPECT_EQ(ParseRunOptions({"--eviction", "mru", "--", "true"}, "run").error,
            "run: bad --eviction 'mru' (expected learned, lru or none)");
}

TEST(ParseProfileOptionsTest, OutputAndPassedOptions) {
  const ProfileParse parse =
      ParseProfileOptions({"-o", "t.trace", "--progress", "--summary", "s", "-q", "job", "-o"});
  ASSERT_EQ(parse.error, "");
  EXPECT_EQ(parse.output, "t.trace");
  EXPECT_TRUE(parse.progress);
  EXPECT_EQ(parse.run_args, (Args{"--mode", "record", "--summary", "s", "-q", "job", "-o"}));
}

TEST(ParseProfileOptionsTest, Errors) {
  EXPECT_EQ(ParseProfileOptions({"--mode", "run", "true"}).error,
            "profile: --mode is always record here");
  EXPECT_EQ(ParseProfileOptions({"--mode=run"}).error, "profile: --mode is always record here");
  EXPECT_EQ(ParseProfileOptions({"-o"}).error, "option -o needs a value");
  EXPECT_EQ(ParseProfileOptions({"--log"}).error, "option --log needs a value");
  EXPECT_EQ(ParseProfileOptions({"--"}).error, "profile: missing command to run");
  EXPECT_EQ(ParseProfileOptions({}).error, "profile: missing command to run");
  EXPECT_TRUE(ParseProfileOptions({"-h"}).help);
}

}  // namespace
}  // namespace spillway::launcher
