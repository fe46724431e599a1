// How the shim backs allocations, end to end on simgpu (backing_program.cc under the preload):
// stream-ordered allocations come from a managed pool and oversubscribe; pools the job created
// stay its own; IPC handles are refused for managed memory; allocations from a module on
// SPILLWAY_DEVICE_MODULES stay device memory; SPILLWAY_BALLAST holds the memory beyond the budget.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/subprocess.h"

namespace spillway::testing {
namespace {

struct Outcome {
  int status = -1;
  std::string output;
  std::string summary;
  std::string stats;
};

// Runs a scenario; with the shim unless `shim` is false. `env` adds to simgpu's 64 MiB device.
Outcome RunScenario(const std::vector<std::string>& args, std::map<std::string, std::string> env,
                    bool shim = true) {
  const std::string base = ::testing::TempDir() + "backing_" + std::to_string(::getpid()) + "_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string summary = base + ".json";
  const std::string stats = base + ".stats.json";
  std::remove(summary.c_str());
  std::remove(stats.c_str());
  env["LD_LIBRARY_PATH"] = SIMGPU_DIR;
  env["SIMGPU_MEMORY"] = "64MiB";
  env["SIMGPU_STATS"] = stats;
  if (shim) {
    const char* runner = std::getenv("SPILLWAY_TEST_PRELOAD");  // sanitizer runtimes
    env["LD_PRELOAD"] = runner != nullptr && *runner != '\0'
                            ? std::string(runner) + ":" + SPILLWAY_LIB
                            : std::string(SPILLWAY_LIB);
    env["SPILLWAY_SUMMARY"] = summary;
  }
  std::vector<std::string> argv = {BACKING_PROGRAM, args[0], KERNEL_LIBRARY};
  argv.insert(argv.end(), args.begin() + 1, args.end());
  const ProcessResult process = RunProcess(argv, env);
  Outcome run{process.exit_code, process.output, ReadFile(summary), ReadFile(stats)};
  std::remove(summary.c_str());
  std::remove(stats.c_str());
  return run;
}

TEST(BackingTest, StreamOrderedAllocationsWithoutTheShimRunOutOfMemory) {
  const Outcome run = RunScenario({"async", "192"}, {}, /*shim=*/false);
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("out of memory"), std::string::npos) << run.output;
}

TEST(BackingTest, StreamOrderedAllocationsComeFromAManagedPoolAndOversubscribe) {
  // 192 MiB of cuMemAllocAsync / default-pool buffers on a 64 MiB device, budget 32 MiB.
  const Outcome run = RunScenario({"async", "192"}, {{"SPILLWAY_DEVICE_MEMORY", "32MiB"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "buffers"), 48) << run.output;
  EXPECT_EQ(Fact(run.output, "wrong"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "first_managed"), 1) << run.output;   // cuMemAllocAsync
  EXPECT_EQ(Fact(run.output, "second_managed"), 1) << run.output;  // the default pool by name
  const std::string& s = run.summary;
  ASSERT_FALSE(s.empty()) << run.output;
  EXPECT_EQ(JsonInt(s, "count"), 49) << s;  // 48 buffers + the managed result array
  EXPECT_GE(JsonInt(s, "managed_bytes_peak"), 192ll << 20) << s;
  EXPECT_GE(JsonInt(s, "discard_bytes"), 192ll << 20) << s;  // every buffer discarded at its free
  EXPECT_GT(JsonInt(s, "evict_bytes"), 0) << s;
  EXPECT_EQ(JsonInt(s, "devices"), 1) << s;
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
  EXPECT_EQ(JsonInt(run.stats, "overcommit_faults"), 0) << run.stats;
  EXPECT_LE(JsonInt(run.stats, "peak_resident_bytes"), 64ll << 20) << run.stats;
}

TEST(BackingTest, PerThreadDefaultStreamAllocationsAreManagedToo) {
  // A 6 MiB budget: the second 4 MiB buffer sends the first out before it is freed.
  const Outcome run = RunScenario({"ptsz"}, {{"SPILLWAY_DEVICE_MEMORY", "6MiB"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "ptsz_managed"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "ptsz_wrong"), 0) << run.output;
  const std::string& s = run.summary;
  EXPECT_EQ(JsonInt(s, "cuMemAllocAsync_ptsz"), 2) << s;
  EXPECT_EQ(JsonInt(s, "cuMemFreeAsync_ptsz"), 2) << s;
  EXPECT_GT(JsonInt(s, "evict_bytes"), 0) << s;
  EXPECT_GE(JsonInt(s, "discard_bytes"), 4ll << 20) << s;  // discarded on the per-thread stream
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
}

// 32 MiB of buffers on a 64 MiB device with a 12 MiB budget: once all are filled the first ones
// are evicted. Copies into them that the driver refuses (from a null source, device-to-device
// from pageable host memory or from a source running past its allocation) leave their buffers'
// data as it was (nothing was discarded for them); the copies that overwrite whole evicted
// buffers (from the host, from another buffer, half of one on a stream) discard those chunks
// first, so they come in zero-filled instead of copied back, and every sum is right.
TEST(BackingTest, CopiesIntoEvictedBuffersDiscardWhatTheyOverwrite) {
  const Outcome run = RunScenario({"copies", "32"}, {{"SPILLWAY_DEVICE_MEMORY", "12MiB"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(Fact(run.output, "null_source"), 0) << run.output;
  EXPECT_NE(Fact(run.output, "short_source"), 0) << run.output;
  EXPECT_NE(Fact(run.output, "host_source"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "copies_wrong"), 0) << run.output;
  const std::string& s = run.summary;
  ASSERT_FALSE(s.empty()) << run.output;
  // Buffers 0 and 1 whole (4 MiB each) and the whole chunk of buffer 2's second half.
  EXPECT_EQ(JsonInt(s, "overwrite_discard_bytes"), 10ll << 20) << s;
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
  // Each buffer's first touch and each discarded chunk are zero-filled, not copied.
  EXPECT_GE(JsonInt(run.stats, "zero_filled_bytes"), (32ll + 10) << 20) << run.stats;
  EXPECT_EQ(JsonInt(run.stats, "overcommit_faults"), 0) << run.stats;
}

// A synchronous memset's discard goes to a stand-in stream for the legacy one (the batch calls
// refuse the legacy stream); it must still wait for the legacy stream's earlier work: here a host
// function that reads the evicted buffer 100 ms late, and must read what the kernel wrote.
TEST(BackingTest, ADiscardForTheLegacyStreamWaitsForItsEarlierWork) {
  const Outcome run = RunScenario({"legacy_order", "32"}, {{"SPILLWAY_DEVICE_MEMORY", "12MiB"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "legacy_order_wrong"), 0) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "overwrite_discard_bytes"), 2ll << 20) << run.summary;
  EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
}

TEST(BackingTest, APoolTheJobCreatedStaysDeviceMemory) {
  const Outcome run = RunScenario({"userpool"}, {});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "userpool_managed"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "ipc_result"), 0) << run.output;
  // Made current, cuMemAllocAsync allocates from it, not from spillway's managed pool.
  EXPECT_EQ(Fact(run.output, "current_pool_managed"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "current_pool_owns"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "default_by_name_managed"), 1) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "managed_bytes_peak"), 1 << 20) << run.summary;
  EXPECT_EQ(JsonInt(run.summary, "ipc_refused"), 0) << run.summary;
}

TEST(BackingTest, APitchedAllocationTooLargeForSixtyFourBitsIsRefusedAsWithoutSpillway) {
  const Outcome run = RunScenario({"pitch"}, {});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "overflow_result"), 2) << run.output;  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(Fact(run.output, "pitch"), 1024) << run.output;         // 1000 rounded up to 512s
  EXPECT_EQ(Fact(run.output, "managed"), 1) << run.output;
}

TEST(BackingTest, IpcHandleForManagedMemoryIsRefusedClearly) {
  const Outcome run = RunScenario({"ipc"}, {});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "managed"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "ipc_result"), 801) << run.output;  // CUDA_ERROR_NOT_SUPPORTED
  EXPECT_NE(run.output.find("cuIpcGetMemHandle refused for allocation #1 (1048576 bytes"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("SPILLWAY_DEVICE_MODULES"), std::string::npos) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "ipc_refused"), 1) << run.summary;
  EXPECT_NE(run.summary.find("cuIpcGetMemHandle refused"), std::string::npos) << run.summary;
}

TEST(BackingTest, AllocationsDuringStreamCaptureStayDeviceMemory) {
  const Outcome run = RunScenario({"capture"}, {});
  ASSERT_EQ(run.status, 0) << run.output;
  // Kept as device memory and passed through to simgpu, which refuses it as the driver does.
  EXPECT_EQ(Fact(run.output, "during_result"), 900) << run.output;
  // Passed through to simgpu: stream-ordered, it would be a memory node of the graph, but the
  // refused cuMemAlloc has invalidated the capture, which the driver then reports.
  EXPECT_EQ(Fact(run.output, "async_during_result"), 901) << run.output;
  // The refused allocation invalidated the capture, as on a real driver: no graph.
  EXPECT_EQ(Fact(run.output, "end_result"), 901) << run.output;
  EXPECT_EQ(Fact(run.output, "after_managed"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "beside_managed"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "inside_result"), 900) << run.output;
  // A thread in relaxed mode may allocate during its capture: managed, and the capture intact.
  EXPECT_EQ(Fact(run.output, "relaxed_managed"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "relaxed_end_result"), 0) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "capture"), 3) << run.summary;
  EXPECT_EQ(JsonInt(run.summary, "module"), 0) << run.summary;
}

TEST(BackingTest, AllocationsFromAListedModuleStayDeviceMemory) {
  const Outcome run =
      RunScenario({"module", FAKE_NCCL_LIB}, {{"SPILLWAY_DEVICE_MODULES", "fakenccl"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "library_managed"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "program_managed"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "library_ipc_result"), 0) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "module"), 1) << run.summary;
  EXPECT_EQ(JsonInt(run.summary, "capture"), 0) << run.summary;
}

TEST(BackingTest, WithoutTheListTheModulesAllocationsAreManaged) {
  const Outcome run = RunScenario({"module", FAKE_NCCL_LIB}, {});  // default list: libnccl
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "library_managed"), 1) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "module"), 0) << run.summary;
}

TEST(BackingTest, EachDeviceHasItsOwnEngineAndBudget) {
  // Two simulated devices of 64 MiB each; 128 MiB of buffers on each, budget 32 MiB per device.
  const Outcome run =
      RunScenario({"multi", "128"}, {{"SIMGPU_DEVICES", "2"},
                                     {"SPILLWAY_DEVICE_MEMORY", "32MiB"},
                                     {"SPILLWAY_HOST_MEMORY", "1GiB"}});  // reported: 1056 MiB
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "buffers"), 64) << run.output;
  EXPECT_EQ(Fact(run.output, "wrong"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "device0_ordinal"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "device1_ordinal"), 1) << run.output;
  // cuMemGetInfo on each device counts that device's 128 MiB of buffers, not both devices'.
  EXPECT_EQ(Fact(run.output, "device0_taken_mib"), 128) << run.output;
  EXPECT_EQ(Fact(run.output, "device1_taken_mib"), 128) << run.output;
  const std::string& s = run.summary;
  EXPECT_EQ(JsonInt(s, "devices"), 2) << s;
  EXPECT_EQ(JsonInt(s, "budget_bytes"), 64ll << 20) << s;  // 2 x 32 MiB
  EXPECT_GT(JsonInt(s, "evict_bytes"), 0) << s;
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
  // All is freed with the first device's context current. cuMemFree's discard waits for the
  // current context only (cuCtxSynchronize), which would not order it after the second device's
  // work: the first device's 128 MiB (and its sums) are discarded, the second's are not.
  EXPECT_GE(JsonInt(s, "discard_bytes"), 128ll << 20) << s;
  EXPECT_LT(JsonInt(s, "discard_bytes"), 129ll << 20) << s;
  // Each device stayed within its own capacity, and each held data.
  EXPECT_EQ(JsonInt(run.stats, "devices"), 2) << run.stats;
  EXPECT_EQ(JsonInt(run.stats, "overcommit_faults"), 0) << run.stats;
  const size_t at = run.stats.find("\"peak_resident_bytes_by_device\":[");
  ASSERT_NE(at, std::string::npos) << run.stats;
  long long first = 0, second = 0;
  ASSERT_EQ(std::sscanf(run.stats.c_str() + at, "\"peak_resident_bytes_by_device\":[%lld,%lld]",
                        &first, &second),
            2)
      << run.stats;
  EXPECT_GT(first, 0) << run.stats;
  EXPECT_GT(second, 0) << run.stats;
  EXPECT_LE(first, 64ll << 20) << run.stats;
  EXPECT_LE(second, 64ll << 20) << run.stats;
}

// Memsets over the second device's evicted buffers (24 MiB, budget 8 MiB): the one made with the
// first device's context current leaves its range to faults (the engine's events belong to the
// second's context, the memset's legacy stream to the first's: recording one on the other fails);
// the one made with the second's current discards the chunk it overwrites, on a stand-in for
// that context's legacy stream. No device call fails, and the data is right.
TEST(BackingTest, AMemsetFromAnotherDevicesContextLeavesItsRangeToFaults) {
  const Outcome run =
      RunScenario({"crossctx"}, {{"SIMGPU_DEVICES", "2"}, {"SPILLWAY_DEVICE_MEMORY", "8MiB"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "crossctx_wrong"), 0) << run.output;
  const std::string& s = run.summary;
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
  // The whole chunk [2 MiB, 4 MiB) of the second memset's evicted buffer.
  EXPECT_EQ(JsonInt(s, "overwrite_discard_bytes"), 2ll << 20) << s;
  // Each buffer discarded at its cuMemFree (asked for in full; the sums' part page is not).
  EXPECT_GE(JsonInt(s, "discard_bytes"), 24ll << 20) << s;
}

TEST(BackingTest, TheEnginesCallsStayOffAStreamAnotherCaptureHasTaken) {
  // 64 MiB of buffers, 24 MiB of budget: the launches on B evict what A used last.
  const Outcome run = RunScenario({"capture_elsewhere"}, {{"SPILLWAY_DEVICE_MEMORY", "24MiB"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "b_capture_status"), 0) << run.output;  // not joined
  EXPECT_EQ(Fact(run.output, "end_result"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "elsewhere_wrong"), 0) << run.output;
  const std::string& s = run.summary;
  EXPECT_GT(JsonInt(s, "evict_bytes"), 0) << s;
  EXPECT_GT(JsonInt(s, "capture_skips"), 0) << s;
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
}

// On the second of two devices, a stream-ordered allocation comes from that device's managed pool:
// the shim finds the current device (cuCtxGetDevice looked up at its one-argument signature).
TEST(BackingTest, StreamOrderedAllocationsOnTheSecondDeviceAreManaged) {
  const Outcome plain = RunScenario({"asyncpool"}, {{"SIMGPU_DEVICES", "2"}}, /*shim=*/false);
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(Fact(plain.output, "asyncpool_managed"), 0) << plain.output;
  EXPECT_EQ(Fact(plain.output, "asyncpool_owner_is_device_pool"), 1) << plain.output;

  const Outcome run = RunScenario({"asyncpool"}, {{"SIMGPU_DEVICES", "2"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "asyncpool_device"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "asyncpool_managed"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "asyncpool_owner_is_device_pool"), 0) << run.output;
  EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
}

// The job's release threshold and reuse flags on its device pool are the managed pool's too.
TEST(BackingTest, TheManagedPoolTakesTheDevicePoolsAttributes) {
  const Outcome run = RunScenario({"asyncpool"}, {{"SIMGPU_DEVICES", "2"}});
  ASSERT_EQ(run.status, 0) << run.output;
  ASSERT_EQ(Fact(run.output, "asyncpool_owner_is_device_pool"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "asyncpool_threshold_max"), 1) << run.output;
  EXPECT_EQ(Fact(run.output, "asyncpool_opportunistic"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "asyncpool_internal"), 1) << run.output;  // left as it was
}

// A framework's stream-ordered allocator sees the same default pool with spillway as without it,
// though a managed pool serves the pool's allocations: its statistics, a release threshold set
// after the first allocation, a high watermark's reset and a trim.
TEST(BackingTest, TheDefaultPoolsStatisticsAndSettingsIncludeTheManagedPool) {
  const Outcome plain = RunScenario({"poolstats"}, {}, /*shim=*/false);
  ASSERT_EQ(plain.status, 0) << plain.output;
  const Outcome run = RunScenario({"poolstats"}, {});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(plain.output, "poolstats_managed"), 0) << plain.output;
  EXPECT_EQ(Fact(run.output, "poolstats_managed"), 1) << run.output;
  const std::vector<std::pair<std::string, long long>> expected = {
      {"poolstats_used", 4},
      {"poolstats_reserved", 4},
      {"poolstats_used_after_free", 0},
      {"poolstats_reserved_after_free", 4},  // the threshold set after the allocation holds
      {"poolstats_used_high", 4},
      {"poolstats_used_high_after_reset", 0},
      {"poolstats_reserved_after_trim", 0},
  };
  for (const auto& [fact, mib] : expected) {
    EXPECT_EQ(Fact(plain.output, fact), mib) << fact << "\n" << plain.output;
    EXPECT_EQ(Fact(run.output, fact), mib) << fact << "\n" << run.output;
  }
  EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
}

// With two devices, each device's default pool counts what was allocated on that device only, as
// without spillway, though each device's managed pool serves its allocations.
TEST(BackingTest, EachDevicesDefaultPoolCountsItsOwnManagedPool) {
  const std::map<std::string, std::string> env = {{"SIMGPU_DEVICES", "2"}};
  const Outcome plain = RunScenario({"devicepools"}, env, /*shim=*/false);
  ASSERT_EQ(plain.status, 0) << plain.output;
  const Outcome run = RunScenario({"devicepools"}, env);
  ASSERT_EQ(run.status, 0) << run.output;
  for (const Outcome* outcome : {&plain, &run}) {
    const long long managed = outcome == &run ? 1 : 0;
    EXPECT_EQ(Fact(outcome->output, "devicepools_managed0"), managed) << outcome->output;
    EXPECT_EQ(Fact(outcome->output, "devicepools_managed1"), managed) << outcome->output;
    EXPECT_EQ(Fact(outcome->output, "devicepools_used0"), 4) << outcome->output;
    EXPECT_EQ(Fact(outcome->output, "devicepools_used1"), 6) << outcome->output;
  }
  EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
}

// Where the driver makes no managed pool for spillway, its stream-ordered allocations come from the
// driver's managed pool, which is the job's too: the job's settings there stay its own, and the
// default pool's statistics do not count that pool.
TEST(BackingTest, TheDriversManagedPoolKeepsTheJobsSettings) {
  const std::map<std::string, std::string> env = {{"SIMGPU_MANAGED_POOL_CREATE", "0"}};
  const Outcome plain = RunScenario({"jobpool"}, env, /*shim=*/false);
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(Fact(plain.output, "jobpool_default_used"), 4) << plain.output;
  const Outcome run = RunScenario({"jobpool"}, env);
  ASSERT_EQ(run.status, 0) << run.output;
  ASSERT_EQ(Fact(run.output, "jobpool_managed"), 1) << run.output;  // from the driver's pool
  EXPECT_EQ(Fact(plain.output, "jobpool_threshold_max"), 1) << plain.output;
  EXPECT_EQ(Fact(run.output, "jobpool_threshold_max"), 1) << run.output;
  // Nothing released at the synchronize, as the job's threshold says, nor by the default pool's
  // trim: the job's own 8 MiB, and with spillway the 4 MiB the default pool served without it,
  // which sit in the job's pool; the default pool's numbers leave them out.
  EXPECT_EQ(Fact(plain.output, "jobpool_reserved_after_free"), 8) << plain.output;
  EXPECT_EQ(Fact(run.output, "jobpool_reserved_after_free"), 12) << run.output;
  EXPECT_EQ(Fact(run.output, "jobpool_default_used"), 0) << run.output;
}

// Threads setting the default pool while the managed pool is being made: the managed pool ends
// with the value the default pool kept. A race: a run without the fix passes too, most of the
// time; under ThreadSanitizer it exercises the copies' ordering.
TEST(BackingTest, SettingsMadeWhileTheManagedPoolIsMadeReachIt) {
  for (int run = 0; run < 5; ++run) {
    const Outcome outcome = RunScenario({"poolrace"}, {});
    ASSERT_EQ(outcome.status, 0) << outcome.output;
    ASSERT_EQ(Fact(outcome.output, "poolrace_managed"), 1) << outcome.output;
    EXPECT_EQ(Fact(outcome.output, "poolrace_same_threshold"), 1) << outcome.output;
  }
}

// A job that resets the device mid-run and goes on (`scenario` "reset"), or releases the primary
// context for the last time and retains it again ("release"). The driver frees the context's
// memory; spillway forgets it too: cuMemGetInfo counts only the new buffers and another context's,
// and freeing an old pointer again, which now lies inside a new buffer, does not discard the new
// buffer's data. The engine that started in the ended context retires and a new one moves the
// new buffers; the other context's buffer keeps its data.
void ExpectTheEndedContextsMemoryForgotten(const std::string& scenario) {
  const Outcome plain = RunScenario({scenario, "24"}, {}, /*shim=*/false);
  ASSERT_EQ(plain.status, 0) << plain.output;
  const Outcome run = RunScenario({scenario, "24"},
                                  {{"SPILLWAY_DEVICE_MEMORY", "16MiB"}, {"SPILLWAY_LOG", "info"}});
  ASSERT_EQ(run.status, 0) << run.output;
  for (const Outcome* outcome : {&plain, &run}) {
    EXPECT_EQ(Fact(outcome->output, "reset_wrong_before"), 0) << outcome->output;
    EXPECT_EQ(Fact(outcome->output, "reset_old_inside_new"), 1) << outcome->output;
    EXPECT_EQ(Fact(outcome->output, "reset_double_free"), 1) << outcome->output;  // INVALID_VALUE
    EXPECT_EQ(Fact(outcome->output, "reset_wrong_after"), 0) << outcome->output;
    EXPECT_EQ(Fact(outcome->output, "reset_kept_wrong"), 0) << outcome->output;
    EXPECT_EQ(Fact(outcome->output, "reset_taken_mib"), 30) << outcome->output;  // 4 + 2 + 6 x 4
  }
  EXPECT_NE(run.output.find("device 0: the context its engine started in ended"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("a context's end freed 6 allocations"), std::string::npos)
      << run.output;
  const std::string& s = run.summary;
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
  EXPECT_EQ(JsonInt(s, "devices"), 1) << s;
  EXPECT_EQ(JsonInt(s, "budget_bytes"), 16ll << 20) << s;
  EXPECT_GT(JsonInt(s, "evict_bytes"), 0) << s;
}

TEST(BackingTest, AResetDevicesFreedMemoryIsForgotten) {
  ExpectTheEndedContextsMemoryForgotten("reset");
}

TEST(BackingTest, APrimaryContextsLastReleaseFreesWhatSpillwayForgets) {
  ExpectTheEndedContextsMemoryForgotten("release");
}

// The engine started in a context the job then destroys retires with it; the next one starts in
// the primary context, where the job goes on.
TEST(BackingTest, AnEngineRetiresWithTheContextItStartedIn) {
  const Outcome run = RunScenario({"destroyctx", "24"},
                                  {{"SPILLWAY_DEVICE_MEMORY", "16MiB"}, {"SPILLWAY_LOG", "info"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "destroyctx_wrong_created"), 0) << run.output;
  EXPECT_EQ(Fact(run.output, "destroyctx_wrong_primary"), 0) << run.output;
  EXPECT_NE(run.output.find("device 0: the context its engine started in ended"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("a context's end freed 6 allocations"), std::string::npos)
      << run.output;
  EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
  EXPECT_GT(JsonInt(run.summary, "evict_bytes"), 0) << run.summary;
}

// 100 rounds of 24 MiB filled under a 16 MiB budget, each ended by a device reset: 100 engines
// retire, and the summary counts what each moved. At least 8 MiB leaves the device a round
// (the budget holds 16 of the 24 MiB; no round moves more than the 24 MiB it filled), so an
// exit summary that dropped engines past some count reads less than 100 x 8 MiB.
TEST(BackingTest, TheSummaryCountsEveryRetiredEnginesMoves) {
  const Outcome run = RunScenario({"resets", "100"}, {{"SPILLWAY_DEVICE_MEMORY", "16MiB"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "resets_wrong"), 0) << run.output;
  EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
  EXPECT_GE(JsonInt(run.summary, "evict_bytes"), 100ll * (8ll << 20)) << run.summary;
}

TEST(BackingTest, BallastHoldsThePhysicalMemoryBeyondTheBudget) {
  const Outcome run = RunScenario(
      {"info"},
      {{"SPILLWAY_DEVICE_MEMORY", "16MiB"}, {"SPILLWAY_BALLAST", "1"}, {"SPILLWAY_LOG", "info"}});
  ASSERT_EQ(run.status, 0) << run.output;
  // 64 MiB free at the start, less the 16 MiB budget, less 5% of 64 MiB headroom.
  const long long ballast = (64ll << 20) - (16ll << 20) - (64ll << 20) / 20;
  EXPECT_EQ(JsonInt(run.summary, "ballast_bytes"), ballast) << run.summary;
  EXPECT_NE(run.output.find("SPILLWAY_BALLAST: device 0 holds"), std::string::npos) << run.output;
  EXPECT_GE(JsonInt(run.stats, "peak_resident_bytes"), ballast) << run.stats;
}

TEST(BackingTest, BallastLeavesTheHeadroomItIsGiven) {
  const Outcome run = RunScenario({"info"}, {{"SPILLWAY_DEVICE_MEMORY", "16MiB"},
                                             {"SPILLWAY_BALLAST", "1"},
                                             {"SPILLWAY_BALLAST_HEADROOM", "4MiB"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "ballast_bytes"), (64ll - 16 - 4) << 20) << run.summary;
}

TEST(BackingTest, BadBallastValueIsReported) {
  const Outcome run = RunScenario({"info"}, {{"SPILLWAY_BALLAST", "yes"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("SPILLWAY_BALLAST: cannot use 'yes'"), std::string::npos) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "ballast_bytes"), 0) << run.summary;
}

}  // namespace
}  // namespace spillway::testing
