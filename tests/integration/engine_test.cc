// The residency engine end to end on simgpu: the demo job that stops with out-of-memory on its
// own finishes under the shim in run mode, with the verified checksum, and the simulator's stats
// show the engine moved the data ahead of the kernels instead of leaving it to demand faults; a
// memset over evicted data has the chunks it overwrites discarded rather than copied back in.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/subprocess.h"

namespace spillway::testing {
namespace {

const std::string kOut = SPILLWAY_TEST_OUT_DIR;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid()) + ".json";
}

// On a driver before CUDA 13.0 (no cuMemDiscardBatchAsync; cuMemPrefetchAsync and cuMemAdvise
// with a location from 12.2), the engine moves data as on 13.0, discards nothing, and says no
// error: every driver function is looked up at the version of the signature spillway calls.
TEST(Engine, TheDemoRunsOnADriverBeforeCuda13) {
  const std::vector<std::string> job = {
      kOut + "/oversubscribe", "--factor", "3", "--buffer", "4MiB", "--passes", "2"};
  const std::string summary_path = TempPath("driver_12_4_summary");
  const std::map<std::string, std::string> env = {
      {"LD_LIBRARY_PATH", kOut + "/simgpu"}, {"SIMGPU_MEMORY", "64MiB"},
      {"SIMGPU_DRIVER_VERSION", "12040"},    {"LD_PRELOAD", kOut + "/libspillway.so"},
      {"SPILLWAY_DEVICE_MEMORY", "64MiB"},   {"SPILLWAY_SUMMARY", summary_path}};
  const ProcessResult run = RunProcess(job, env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("matches the host's: 2 passes over 192.00 MiB done"), std::string::npos)
      << run.output;
  const std::string summary = ReadFile(summary_path);
  std::remove(summary_path.c_str());
  EXPECT_GT(JsonInt(summary, "prefetch_bytes"), 0) << summary;
  EXPECT_GT(JsonInt(summary, "evict_bytes"), 0) << summary;
  EXPECT_EQ(JsonInt(summary, "discard_bytes"), 0) << summary;
  EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;
}

TEST(Engine, OversubscribedDemoFinishesUnderRunMode) {
  const std::vector<std::string> job = {
      kOut + "/oversubscribe", "--factor", "3", "--buffer", "4MiB", "--passes", "2"};
  const std::map<std::string, std::string> simgpu = {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                                     {"SIMGPU_MEMORY", "64MiB"}};
  const ProcessResult plain = RunProcess(job, simgpu);
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_NE(plain.output.find("out of memory"), std::string::npos) << plain.output;

  const std::string summary_path = TempPath("engine_summary");
  const std::string stats_path = TempPath("engine_stats");
  std::map<std::string, std::string> env = simgpu;
  env["LD_PRELOAD"] = kOut + "/libspillway.so";
  env["SPILLWAY_DEVICE_MEMORY"] = "64MiB";
  env["SPILLWAY_SUMMARY"] = summary_path;
  env["SIMGPU_STATS"] = stats_path;
  const ProcessResult shimmed = RunProcess(job, env);
  ASSERT_EQ(shimmed.exit_code, 0) << shimmed.output;
  EXPECT_NE(shimmed.output.find("matches the host's: 2 passes over 192.00 MiB done"),
            std::string::npos)
      << shimmed.output;

  const std::string summary = ReadFile(summary_path);
  ASSERT_FALSE(summary.empty()) << "no summary at " << summary_path;
  EXPECT_NE(summary.find("\"policy\":\"learned\""), std::string::npos) << summary;  // the default
  EXPECT_EQ(JsonInt(summary, "budget_bytes"), 64ll << 20) << summary;
  // 48 buffers x (fill + 2 updates + checksum), every one resolved.
  EXPECT_EQ(JsonInt(summary, "launches_resolved"), 48 * 4) << summary;
  EXPECT_GT(JsonInt(summary, "prefetch_bytes"), 0) << summary;
  EXPECT_GT(JsonInt(summary, "evict_bytes"), 0) << summary;
  EXPECT_GE(JsonInt(summary, "discard_bytes"), 192ll << 20) << summary;  // every buffer freed
  EXPECT_GE(JsonInt(summary, "managed_bytes_peak"), 192ll << 20) << summary;
  EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;

  const std::string stats = ReadFile(stats_path);
  ASSERT_FALSE(stats.empty()) << "no simgpu stats at " << stats_path;
  EXPECT_GT(JsonInt(stats, "prefetched_bytes"), 0) << stats;
  EXPECT_GT(JsonInt(stats, "evicted_bytes"), 0) << stats;
  EXPECT_EQ(JsonInt(stats, "overcommit_faults"), 0) << stats;
  // Plain demand paging faults every 2 MiB chunk of every buffer on every pass (at least 48 x 2 x
  // 4 = 384 faults); with the engine the data is on the device before each kernel.
  const long long faults = JsonInt(stats, "count");  // demand_faults.count, the first "count"
  EXPECT_GE(faults, 0) << stats;
  EXPECT_LT(faults, 48) << stats;
  std::remove(summary_path.c_str());
  std::remove(stats_path.c_str());
}

// The demo with --overwrite: once 32 MiB of buffers are filled on a 16 MiB device, each is set
// from its second MiB on by a memset. The whole chunks a memset covers that the engine had
// evicted (4 buffers at least, 2 MiB each) are discarded first, so they are zero-filled on the
// device instead of copied back in, and the words before them keep the filled values; each buffer
// is brought in before its memset, room made by the engine.
TEST(Engine, AMemsetOverEvictedBuffersDiscardsTheChunksItOverwrites) {
  const std::string summary_path = TempPath("engine_overwrite_summary");
  const std::string stats_path = TempPath("engine_overwrite_stats");
  const ProcessResult shimmed = RunProcess({kOut + "/oversubscribe", "--factor", "2", "--buffer",
                                            "4MiB", "--passes", "1", "--overwrite"},
                                           {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                            {"SIMGPU_MEMORY", "16MiB"},
                                            {"SIMGPU_STATS", stats_path},
                                            {"LD_PRELOAD", kOut + "/libspillway.so"},
                                            {"SPILLWAY_DEVICE_MEMORY", "16MiB"},
                                            {"SPILLWAY_SUMMARY", summary_path}});
  ASSERT_EQ(shimmed.exit_code, 0) << shimmed.output;
  EXPECT_NE(shimmed.output.find("matches the host's: 1 passes over 32.00 MiB done"),
            std::string::npos)
      << shimmed.output;
  const std::string summary = ReadFile(summary_path);
  const long long overwritten = JsonInt(summary, "overwrite_discard_bytes");
  EXPECT_GE(overwritten, 8ll << 20) << summary;
  EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;
  // Every buffer's first touch (32 MiB) and every chunk discarded before a memset is zero-filled.
  const std::string stats = ReadFile(stats_path);
  EXPECT_GE(JsonInt(stats, "zero_filled_bytes"), (32ll << 20) + overwritten) << stats;
  // The engine brought in what each memset covers, room made first: the memsets fault nothing in
  // (each of the 8 would fault 2 chunks in, 16 in all).
  const long long faults = JsonInt(stats, "count", "demand_faults");
  EXPECT_GE(faults, 0) << stats;
  EXPECT_LE(faults, 2) << stats;
  std::remove(summary_path.c_str());
  std::remove(stats_path.c_str());
}

TEST(Engine, BadDeviceMemoryValueIsReportedAndTheDefaultUsed) {
  const std::vector<std::string> job = {
      kOut + "/oversubscribe", "--factor", "0.5", "--buffer", "4MiB", "--passes", "1"};
  const std::string summary_path = TempPath("engine_bad_budget");
  const ProcessResult shimmed = RunProcess(job, {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                                 {"SIMGPU_MEMORY", "64MiB"},
                                                 {"LD_PRELOAD", kOut + "/libspillway.so"},
                                                 {"SPILLWAY_DEVICE_MEMORY", "lots"},
                                                 {"SPILLWAY_SUMMARY", summary_path}});
  EXPECT_EQ(shimmed.exit_code, 0) << shimmed.output;
  EXPECT_NE(shimmed.output.find("SPILLWAY_DEVICE_MEMORY: cannot use 'lots'"), std::string::npos)
      << shimmed.output;
  const std::string summary = ReadFile(summary_path);
  // Default: physical free memory minus 5% of the total.
  EXPECT_GT(JsonInt(summary, "budget_bytes"), 0) << summary;
  EXPECT_LE(JsonInt(summary, "budget_bytes"), 64ll << 20) << summary;
  EXPECT_NE(summary.find("SPILLWAY_DEVICE_MEMORY"), std::string::npos) << summary;
  std::remove(summary_path.c_str());
}

}  // namespace
}  // namespace spillway::testing
