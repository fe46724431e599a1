// Passthrough under the shim changes nothing: the demo and a multi-threaded, multi-stream
// workload give the same output and exit status on simgpu with and without libspillway.so, and
// the exit summary counts what they called.
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/integration/subprocess.h"

namespace spillway::testing {
namespace {

const std::string kOut = SPILLWAY_TEST_OUT_DIR;

// The environment of a job on simgpu, with or without the shim.
std::map<std::string, std::string> JobEnv(bool shim, const std::string& summary = "",
                                          const std::string& mode = "") {
  std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                            {"SIMGPU_MEMORY", "64MiB"}};
  if (shim) {
    env["LD_PRELOAD"] = kOut + "/libspillway.so";
    if (!summary.empty()) env["SPILLWAY_SUMMARY"] = summary;
    if (!mode.empty()) env["SPILLWAY_MODE"] = mode;
  }
  return env;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid()) + ".json";
}

// The count of `function` in the summary's "calls" object, or -1 when absent.
long CallCount(const std::string& summary, const std::string& function) {
  const std::string key = "\"" + function + "\":";
  const size_t at = summary.find(key);
  if (at == std::string::npos) return -1;
  return std::strtol(summary.c_str() + at + key.size(), nullptr, 10);
}

TEST(Passthrough, MultistreamGivesTheSameResultsUnderTheShim) {
  const std::vector<std::string> job = {
      kOut + "/multistream", "--threads", "4", "--words", "65536", "--rounds", "3"};
  const ProcessResult plain = RunProcess(job, JobEnv(false));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const std::string summary_path = TempPath("multistream");
  const ProcessResult shimmed = RunProcess(job, JobEnv(true, summary_path));
  EXPECT_EQ(shimmed.exit_code, 0) << shimmed.output;
  EXPECT_EQ(shimmed.output, plain.output);

  const std::string summary = ReadFile(summary_path);
  ASSERT_FALSE(summary.empty()) << "no summary at " << summary_path;
  // 4 threads x (1 fill + 3 rounds x 2 updates) + 4 x 2 checksums.
  EXPECT_EQ(CallCount(summary, "cuLaunchKernel"), 4 * 7 + 8) << summary;
  EXPECT_EQ(CallCount(summary, "launches"), 4 * 7 + 8) << summary;
  EXPECT_EQ(CallCount(summary, "cuMemAllocAsync"), 4) << summary;
  EXPECT_EQ(CallCount(summary, "cuMemFreeAsync"), 4) << summary;
  EXPECT_EQ(CallCount(summary, "cuMemcpyHtoDAsync_v2"), 4) << summary;
  EXPECT_GE(CallCount(summary, "cuStreamSynchronize"), 5) << summary;
  std::remove(summary_path.c_str());
}

// In off mode the shim is pure passthrough: the job fails exactly as it does without it.
TEST(Passthrough, DemoFailsTheSameWayWhenItDoesNotFit) {
  const std::vector<std::string> job = {
      kOut + "/oversubscribe", "--factor", "3", "--buffer", "4MiB", "--passes", "1"};
  const ProcessResult plain = RunProcess(job, JobEnv(false));
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_NE(plain.output.find("out of memory"), std::string::npos) << plain.output;
  const std::string summary_path = TempPath("oversubscribe");
  const ProcessResult shimmed = RunProcess(job, JobEnv(true, summary_path, "off"));
  EXPECT_EQ(shimmed.exit_code, 2) << shimmed.output;
  EXPECT_EQ(shimmed.output, plain.output);
  const std::string summary = ReadFile(summary_path);
  // 64 MiB / 4 MiB = 16 buffers fit; the 17th allocation fails and is counted too.
  EXPECT_EQ(CallCount(summary, "cuMemAlloc_v2"), 17) << summary;
  std::remove(summary_path.c_str());
}

TEST(Passthrough, DemoGivesTheSameChecksumWhenItFits) {
  const std::vector<std::string> job = {
      kOut + "/oversubscribe", "--factor", "0.5", "--buffer", "4MiB", "--passes", "2"};
  const ProcessResult plain = RunProcess(job, JobEnv(false));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("matches"), std::string::npos) << plain.output;
  for (const char* mode : {"run", "off"}) {
    const ProcessResult shimmed = RunProcess(job, JobEnv(true, "", mode));
    EXPECT_EQ(shimmed.exit_code, 0) << mode << ": " << shimmed.output;
    EXPECT_EQ(shimmed.output, plain.output) << mode;
  }
}

// Processes that fork under the shim (shells, `time`, `timeout`, launchers like torchrun) must
// not hang: the child's fork handler once unlocked a lock the parent's thread held and deadlocked.
TEST(Passthrough, ForkingProcessesDoNotHang) {
  for (const char* mode : {"run", "off"}) {
    const ProcessResult result =
        RunProcess({"/usr/bin/timeout", "30", "/bin/sh", "-c", "/bin/true & wait; echo forked-ok"},
                   JobEnv(true, "", mode));
    EXPECT_EQ(result.exit_code, 0) << mode << ": " << result.output;
    EXPECT_NE(result.output.find("forked-ok"), std::string::npos) << mode << ": " << result.output;
  }
}

}  // namespace
}  // namespace spillway::testing
