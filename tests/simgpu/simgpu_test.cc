// Tests of simgpu, the simulated GPU (libcuda.so.1). Most run in this process with a 64 MiB
// device; those that need another configuration or the exit-time stats file run this binary
// again as a child (`--scenario NAME`, see scenarios.cc) and read what it left.
#include <cuda.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scenarios.h"

namespace {

constexpr size_t kChunk = size_t{2} << 20;
constexpr size_t kCapacity = size_t{64} << 20;  // set in main() for this process

// ---- child scenarios ---------------------------------------------------------------------------

struct ChildResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
  std::string stats;   // the SIMGPU_STATS file
};

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// `shell_prefix` runs in the child's shell first (a `ulimit`, say).
ChildResult RunChild(const std::string& scenario, const std::string& env,
                     const std::string& shell_prefix = "") {
  ChildResult r;
  std::string tmpl = ::testing::TempDir() + "/simgpu_stats_XXXXXX";
  int fd = mkstemp(tmpl.data());
  if (fd >= 0) close(fd);
  std::string cmd = shell_prefix + "env SIMGPU_STATS=" + tmpl + " " + env + " " + SelfPath() +
                    " --scenario " + scenario + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(tmpl);
  std::stringstream ss;
  ss << in.rdbuf();
  r.stats = ss.str();
  unlink(tmpl.c_str());
  return r;
}

// The number after `"key":` in a flat reading of the JSON (keys used here are unique).
double JsonNumber(const std::string& json, const std::string& key) {
  size_t pos = json.find("\"" + key + "\"");
  if (pos == std::string::npos) return -1;
  pos = json.find(':', pos);
  return std::strtod(json.c_str() + pos + 1, nullptr);
}

double OutputNumber(const std::string& out, const std::string& key) {
  size_t pos = out.find(key + "=");
  if (pos == std::string::npos) return -1;
  return std::strtod(out.c_str() + pos + key.size() + 1, nullptr);
}

#define EXPECT_CHILD_OK(r) ASSERT_EQ((r).exit_code, 0) << (r).output

TEST(SimgpuScenario, FaultsCountOnlyTouchedChunks) {
  ChildResult r = RunChild("faults_partial", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 4);
  EXPECT_EQ(JsonNumber(r.stats, "bytes"), 4.0 * kChunk);
  EXPECT_EQ(JsonNumber(r.stats, "kernels_launched"), 2);
  EXPECT_EQ(JsonNumber(r.stats, "peak_resident_bytes"), 4.0 * kChunk);
}

TEST(SimgpuScenario, FaultsThroughPointersStoredInDeviceMemory) {
  ChildResult r = RunChild("faults_pointer_chase", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 2);
}

TEST(SimgpuScenario, EvictsOldestResidentChunkFirst) {
  ChildResult r = RunChild("eviction_order", "SIMGPU_MEMORY=8MiB");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 6);
  EXPECT_EQ(JsonNumber(r.stats, "evicted_bytes"), 2.0 * kChunk);
  EXPECT_EQ(JsonNumber(r.stats, "capacity_evicted_bytes"), 2.0 * kChunk);  // the faults made room
  EXPECT_EQ(JsonNumber(r.stats, "peak_resident_bytes"), 4.0 * kChunk);
  EXPECT_EQ(JsonNumber(r.stats, "device_capacity_bytes"), 8.0 * (1 << 20));
}

TEST(SimgpuScenario, TheStatsNoteTheCountersAtEachContextSynchronize) {
  ChildResult r = RunChild("context_syncs", "SIMGPU_MEMORY=8MiB");
  EXPECT_CHILD_OK(r);
  const size_t at = r.stats.find("\"context_syncs\"");
  ASSERT_NE(at, std::string::npos) << r.stats;
  // Each entry's counters, in order: kernels, demand-fault bytes, bytes evicted on its own.
  std::vector<std::string> entries;
  for (size_t pos = r.stats.find('{', at); pos != std::string::npos;
       pos = r.stats.find('{', pos + 1)) {
    entries.push_back(r.stats.substr(pos, r.stats.find('}', pos) - pos + 1));
  }
  ASSERT_EQ(entries.size(), 3u) << r.stats;
  const double expected[3][3] = {
      {2, 4.0 * kChunk, 0}, {3, 5.0 * kChunk, 1.0 * kChunk}, {4, 6.0 * kChunk, 2.0 * kChunk}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(JsonNumber(entries[i], "kernels_launched"), expected[i][0]) << entries[i];
    EXPECT_EQ(JsonNumber(entries[i], "demand_fault_bytes"), expected[i][1]) << entries[i];
    EXPECT_EQ(JsonNumber(entries[i], "capacity_evicted_bytes"), expected[i][2]) << entries[i];
  }
}

TEST(SimgpuScenario, ASmallManagedAllocationTakesItsPagesNotAWholeChunk) {
  ChildResult r = RunChild("small_pieces", "SIMGPU_MEMORY=256KiB");
  EXPECT_CHILD_OK(r);
  constexpr double kSmall = 100 << 10;
  EXPECT_EQ(JsonNumber(r.stats, "count"), 3);  // a, b, c; the second touch of b is resident
  EXPECT_EQ(JsonNumber(r.stats, "bytes"), 3 * kSmall);
  EXPECT_EQ(JsonNumber(r.stats, "capacity_evicted_bytes"), kSmall);  // a, for c
  EXPECT_EQ(OutputNumber(r.output, "free_after_small"), 256 * 1024 - 2 * kSmall);
  // The 10 KiB in the second chunk of the large allocation come in as three 4 KiB pages.
  EXPECT_EQ(JsonNumber(r.stats, "prefetched_bytes"), 12 << 10);
  EXPECT_EQ(JsonNumber(r.stats, "peak_resident_bytes"), 2 * kSmall + (12 << 10));
}

TEST(SimgpuScenario, PrefetchRemovesFaultsAndOverlapsCompute) {
  ChildResult r = RunChild("prefetch_overlap", "SIMGPU_MEMORY=64MiB SIMGPU_H2D_GBPS=40");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 0);
  EXPECT_EQ(JsonNumber(r.stats, "prefetched_bytes"), 8.0 * kChunk);
  double expected_ms = 8.0 * kChunk / 40e9 * 1e3;
  EXPECT_NEAR(OutputNumber(r.output, "kernel_ms"), 1.0, 1e-4);
  EXPECT_NEAR(OutputNumber(r.output, "prefetch_ms"), expected_ms, 1e-4);
  // Both started at time 0: the prefetch ends at expected_ms, before the kernel ends.
  EXPECT_NEAR(OutputNumber(r.output, "k0_to_p1_ms"), expected_ms, 1e-4);
  EXPECT_NEAR(JsonNumber(r.stats, "virtual_seconds"), 1e-3 + 10e-6, 1e-7);
}

TEST(SimgpuScenario, AThreadsBlockedCallDelaysItsNextLaunchByTheCalibratedCost) {
  const std::string path = ::testing::TempDir() + "/host_clock_calibration.json";
  std::ofstream(path) << R"({"spillway_calibration": 1, "calls": {
      "launch": {"seconds": 1e-4}, "prefetch_to_device": {"seconds": 2e-3}}})";
  ChildResult r = RunChild("host_clock", "SIMGPU_MEMORY=64MiB SIMGPU_CALIBRATION=" + path);
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(r.output.find("SIMGPU_CALIBRATION"), std::string::npos) << r.output;
  // The other thread's 2 ms do not delay this one: its launch's 0.1 ms, then the 1 ms kernel.
  EXPECT_NEAR(OutputNumber(r.output, "b_then_main_ms"), 1.1, 1e-4);
  // After the synchronization: the prefetch's 2 ms and the launch's 0.1 ms, then the kernel.
  EXPECT_NEAR(OutputNumber(r.output, "after_sync_ms"), 3.1, 1e-4);
  // Without a calibration the calls cost nothing.
  ChildResult plain = RunChild("host_clock", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(plain);
  EXPECT_NEAR(OutputNumber(plain.output, "b_then_main_ms"), 1.0, 1e-4);
  EXPECT_NEAR(OutputNumber(plain.output, "after_sync_ms"), 1.0, 1e-4);
  // A bad calibration is named on stderr and the defaults are used.
  std::ofstream(path) << R"({"spillway_calibration": 1, "calls": {"launch": {"seconds": -1}}})";
  ChildResult bad = RunChild("host_clock", "SIMGPU_MEMORY=64MiB SIMGPU_CALIBRATION=" + path);
  EXPECT_CHILD_OK(bad);
  EXPECT_NE(bad.output.find("simgpu: SIMGPU_CALIBRATION: calibration " + path +
                            ": calls.launch.seconds: -1 is not a number"),
            std::string::npos)
      << bad.output;
  EXPECT_NEAR(OutputNumber(bad.output, "after_sync_ms"), 1.0, 1e-4);
}

TEST(SimgpuScenario, DiscardDropsResidencyWithoutCopyBack) {
  ChildResult r = RunChild("discard", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(OutputNumber(r.output, "legacy_accepted"), 0);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 8);
  EXPECT_EQ(JsonNumber(r.stats, "evicted_bytes"), 0);
  EXPECT_EQ(JsonNumber(r.stats, "prefetched_bytes"), 0);
  EXPECT_EQ(JsonNumber(r.stats, "discarded_bytes"), 4.0 * kChunk + 4.0 * kChunk + 4.0 * kChunk);
}

// What a discard covers is gone (the driver: indeterminate until written; nvidia-uvm: zeroes),
// on the device and on the host alike; nothing outside the range is touched.
TEST(SimgpuScenario, DiscardForgetsTheRangesContentsAndNothingElse) {
  ChildResult r = RunChild("discard_contents", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(r);
  const double pages = OutputNumber(r.output, "whole_pages_inside");
  EXPECT_GT(pages, 3.0 * kChunk - 8192);
  EXPECT_EQ(OutputNumber(r.output, "zero_inside"), pages);
  const double outside = OutputNumber(r.output, "outside");
  EXPECT_EQ(outside, kChunk - 4000);
  EXPECT_EQ(OutputNumber(r.output, "kept_outside"), outside);
}

TEST(SimgpuScenario, ResidencyCallsNeedManagedMemoryThroughoutTheirRange) {
  ChildResult r = RunChild("managed_ranges", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(r);
  const int invalid = CUDA_ERROR_INVALID_VALUE;
  ASSERT_EQ(OutputNumber(r.output, "adjacent"), 1) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "across_two"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "past_the_end"), invalid) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "discard_past_the_end"), invalid) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "into_device"), invalid) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "whole_small"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "small_forgotten"), 1) << r.output;
}

TEST(SimgpuScenario, ChunksHoldingNoDataAreZeroFilledWithoutTransfer) {
  ChildResult r =
      RunChild("zero_fill", "SIMGPU_MEMORY=64MiB SIMGPU_H2D_GBPS=40 SIMGPU_D2H_GBPS=50");
  EXPECT_CHILD_OK(r);
  const double copy_ms = 4.0 * kChunk / 40e9 * 1e3;
  EXPECT_NEAR(OutputNumber(r.output, "fresh_prefetch_ms"), 0.0, 1e-4);
  EXPECT_NEAR(OutputNumber(r.output, "fresh_fault_ms"), 2 * 30e-3 + 10e-3, 1e-4);  // latency only
  EXPECT_NEAR(OutputNumber(r.output, "evict_ms"), 4.0 * kChunk / 50e9 * 1e3, 1e-4);
  EXPECT_NEAR(OutputNumber(r.output, "copy_prefetch_ms"), copy_ms, 1e-4);
  EXPECT_NEAR(OutputNumber(r.output, "discarded_prefetch_ms"), 0.0, 1e-4);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 2);
  EXPECT_EQ(JsonNumber(r.stats, "bytes"), 2.0 * kChunk);
  EXPECT_EQ(JsonNumber(r.stats, "prefetched_bytes"), 12.0 * kChunk);
  // The first prefetch, the two faults and the prefetch after the discard.
  EXPECT_EQ(JsonNumber(r.stats, "zero_filled_bytes"), 10.0 * kChunk);
  EXPECT_EQ(JsonNumber(r.stats, "evicted_bytes"), 4.0 * kChunk);
}

TEST(SimgpuScenario, PrefetchToHostEvicts) {
  ChildResult r = RunChild("prefetch_host", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 4);
  EXPECT_EQ(JsonNumber(r.stats, "evicted_bytes"), 2.0 * kChunk);
  EXPECT_EQ(JsonNumber(r.stats, "capacity_evicted_bytes"), 0);  // asked for, not forced
}

TEST(SimgpuScenario, ManagedOversubscriptionWorks) {
  ChildResult r = RunChild("oversubscribe", "SIMGPU_MEMORY=16MiB");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(OutputNumber(r.output, "chunks"), 24);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 24);
  EXPECT_EQ(JsonNumber(r.stats, "evicted_bytes"), 16.0 * kChunk);
  EXPECT_EQ(JsonNumber(r.stats, "peak_resident_bytes"), 16.0 * (1 << 20));
}

TEST(SimgpuScenario, HostWritesThenDeviceFaults) {
  ChildResult r = RunChild("host_access", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 5);  // 4 chunks read + the output chunk
  EXPECT_GE(JsonNumber(r.stats, "host_opened_chunks"), 4);
}

TEST(SimgpuScenario, PreferredLocationHostMapsRemotely) {
  ChildResult r = RunChild("prefer_host", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 1);
  EXPECT_EQ(JsonNumber(r.stats, "remote_mapped_bytes"), 1.0 * kChunk);
}

TEST(SimgpuScenario, ErrorsBeforeInitAndWithoutContext) {
  ChildResult r = RunChild("not_initialized", "");
  EXPECT_CHILD_OK(r);
}

TEST(SimgpuScenario, DeviceAllocationEvictsManaged) {
  ChildResult r = RunChild("device_alloc_evicts", "SIMGPU_MEMORY=8MiB");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(JsonNumber(r.stats, "evicted_bytes"), 2.0 * kChunk);
  EXPECT_EQ(JsonNumber(r.stats, "device_alloc_bytes_peak"), 2.0 * kChunk);
}

// A module and memory live as long as the context they were made in, as on the driver (a library
// is context-independent).
TEST(SimgpuScenario, AContextsEndUnloadsItsModulesAndFreesItsMemory) {
  ChildResult r = RunChild("context_modules", "SIMGPU_MEMORY=8MiB");
  EXPECT_CHILD_OK(r);
  const int invalid = CUDA_ERROR_INVALID_HANDLE;
  for (const char* key : {"destroyed_get", "destroyed_launch", "reset_get", "reset_launch",
                          "reset_setup_module_get", "released_get"}) {
    EXPECT_EQ(OutputNumber(r.output, key), invalid) << key << "\n" << r.output;
  }
  for (const char* key : {"destroyed_memory", "reset_memory", "reset_managed", "released_memory"}) {
    EXPECT_EQ(OutputNumber(r.output, key), CUDA_ERROR_NOT_FOUND) << key << "\n" << r.output;
  }
  for (const char* key : {"primary_after_destroy_get", "still_retained_get", "library_get_kernel",
                          "keeper_memory", "keeper_memory_at_end"}) {
    EXPECT_EQ(OutputNumber(r.output, key), 0) << key << "\n" << r.output;
  }
}

TEST(SimgpuScenario, EventsAndContextSynchronizationStayInTheirContext) {
  ChildResult r = RunChild("event_contexts", "SIMGPU_MEMORY=8MiB SIMGPU_DEVICES=2");
  EXPECT_CHILD_OK(r);
  const int invalid = CUDA_ERROR_INVALID_HANDLE;
  EXPECT_EQ(OutputNumber(r.output, "on_other_stream"), invalid) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "on_other_legacy"), invalid) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "on_own_stream"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "wait_across"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "on_own_legacy"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "other_context_waited_for"), 0) << r.output;
}

TEST(SimgpuScenario, TheLegacyStreamIsUnusableWhileABlockingStreamCaptures) {
  ChildResult r = RunChild("legacy_during_capture", "SIMGPU_MEMORY=64MiB");
  EXPECT_CHILD_OK(r);
  const int implicit = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  EXPECT_EQ(OutputNumber(r.output, "blocking_query"), implicit) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "blocking_prefetch"), implicit) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "blocking_launch"), implicit) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "blocking_alloc_async"), implicit) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "blocking_capture_end"), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
      << r.output;
  EXPECT_EQ(OutputNumber(r.output, "separate_query"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "separate_prefetch"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "separate_launch"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "separate_alloc_async"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "separate_capture_end"), 0) << r.output;
}

// SIMGPU_HOLD_KERNEL_US holds a kernel before its body runs, so a discard on another stream that
// nothing orders after it lands first (the kernel sums zeroes); ordered by an event, it does not.
TEST(SimgpuScenario, AHeldKernelIsOvertakenByWorkNotOrderedAfterIt) {
  ChildResult r = RunChild("kernel_hold", "SIMGPU_MEMORY=64MiB SIMGPU_HOLD_KERNEL_US=200000");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(OutputNumber(r.output, "overtaken_sum"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "waited_sum"), kChunk / 4) << r.output;
}

TEST(SimgpuScenario, TwoDevicesHaveSeparateCapacityAndResidency) {
  ChildResult r = RunChild("two_devices", "SIMGPU_MEMORY=8MiB SIMGPU_DEVICES=2");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(JsonNumber(r.stats, "devices"), 2.0);
  EXPECT_EQ(JsonNumber(r.stats, "overcommit_faults"), 0.0);
  EXPECT_EQ(JsonNumber(r.stats, "count"), 2.0);  // demand_faults.count: on device 1
  EXPECT_EQ(JsonNumber(r.stats, "prefetched_bytes"), 2.0 * kChunk);
  EXPECT_NE(r.stats.find("\"peak_resident_bytes_by_device\":[8388608,4194304]"), std::string::npos)
      << r.stats;
}

TEST(SimgpuScenario, EachDeviceHasItsOwnDefaultPool) {
  ChildResult r = RunChild("device_pools", "SIMGPU_MEMORY=8MiB SIMGPU_DEVICES=2");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(OutputNumber(r.output, "pools_differ"), 1) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "by_location_is_device1"), 1) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "set_other_devices_pool"), CUDA_ERROR_INVALID_VALUE) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "async_device"), 1) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "from_pool_device"), 1) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "pool0_used_chunks"), 0) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "pool1_used_chunks"), 3) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "device0_free_chunks"), 4) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "device1_free_chunks"), 1) << r.output;
}

// A hold past a second a kernel (1e30 once held each kernel 10 s: a job that never ends) is one
// line and the default; 0, the documented default, is taken without a word.
TEST(SimgpuScenario, AKernelHoldOutOfRangeIsOneLineAndZeroIsTakenSilently) {
  ChildResult r = RunChild("plain", "SIMGPU_HOLD_KERNEL_US=1e30");
  EXPECT_CHILD_OK(r);
  EXPECT_NE(r.output.find("simgpu: SIMGPU_HOLD_KERNEL_US='1e30' is not a number from 0 to 1e+06; "
                          "using the default 0"),
            std::string::npos)
      << r.output;
  r = RunChild("plain", "SIMGPU_HOLD_KERNEL_US=0 SIMGPU_H2D_GBPS=inf");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(r.output.find("SIMGPU_HOLD_KERNEL_US"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SIMGPU_H2D_GBPS='inf' is not a number"), std::string::npos) << r.output;
}

TEST(SimgpuScenario, BadDevicesValueFallsBackToOne) {
  ChildResult r = RunChild("plain", "SIMGPU_DEVICES=9");
  EXPECT_CHILD_OK(r);
  EXPECT_NE(r.output.find("SIMGPU_DEVICES=9"), std::string::npos) << r.output;
  EXPECT_EQ(JsonNumber(r.stats, "devices"), 1.0);
}

TEST(SimgpuScenario, BadMemoryValueFallsBackToDefault) {
  ChildResult r = RunChild("plain", "SIMGPU_MEMORY=lots");
  EXPECT_CHILD_OK(r);
  EXPECT_NE(r.output.find("SIMGPU_MEMORY='lots'"), std::string::npos) << r.output;
  EXPECT_EQ(JsonNumber(r.stats, "device_capacity_bytes"), 4.0 * (1u << 30));
}

// A process limited to 100 GiB of address space (`ulimit -v`) cannot reserve simgpu's usual 1 TiB
// device arena: simgpu reserves less and works. (The sanitizers reserve terabytes of shadow.)
TEST(SimgpuScenario, ALimitedAddressSpaceGetsASmallerDeviceArena) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's own shadow memory does not fit a 100 GiB address space";
#endif
  ChildResult r = RunChild("plain", "SIMGPU_MEMORY=64MiB", "ulimit -v 104857600 && ");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(r.output.find("cannot reserve"), std::string::npos) << r.output;
  EXPECT_EQ(JsonNumber(r.stats, "device_capacity_bytes"), 64.0 * (1u << 20));
}

// A real GPU's launch queue holds about a thousand operations per stream; then the host waits.
TEST(SimgpuScenario, AFullStreamQueueHoldsTheHostUntilTheDeviceGoesOn) {
  ChildResult r = RunChild("queue_depth", "SIMGPU_QUEUE_DEPTH=4");
  EXPECT_CHILD_OK(r);
  EXPECT_EQ(OutputNumber(r.output, "held"), 4) << r.output;
  EXPECT_EQ(OutputNumber(r.output, "enqueued"), 6) << r.output;
  ChildResult unbounded = RunChild("queue_depth", "SIMGPU_QUEUE_DEPTH=0");
  EXPECT_CHILD_OK(unbounded);
  EXPECT_EQ(OutputNumber(unbounded.output, "held"), 6) << unbounded.output;
}

TEST(SimgpuScenario, BadQueueDepthFallsBackToTheDefault) {
  ChildResult r = RunChild("plain", "SIMGPU_QUEUE_DEPTH=-3");
  EXPECT_CHILD_OK(r);
  EXPECT_NE(r.output.find("SIMGPU_QUEUE_DEPTH='-3' is not a whole number from 0 to 1048576; "
                          "using the default 1024"),
            std::string::npos)
      << r.output;
}

TEST(SimgpuScenario, FaultsOutsideSimgpuStillCrash) {
  ChildResult r = RunChild("wild_access", "SIMGPU_MEMORY=64MiB");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("scenario survived"), std::string::npos) << r.output;
}

TEST(SimgpuScenario, EarlierSegvHandlerIsChained) {
  ChildResult r = RunChild("chained_handler", "SIMGPU_MEMORY=64MiB");
  EXPECT_EQ(r.exit_code, 42) << r.output;
  EXPECT_EQ(JsonNumber(r.stats, "count"), -1);  // _exit: no stats file, no exit handlers
}

TEST(SimgpuExports, OnlyTheDriverApi) {
  FILE* p = popen("nm -D --defined-only " SIMGPU_LIBRARY " 2>/dev/null", "r");
  ASSERT_NE(p, nullptr);
  std::string all;
  char line[512];
  int count = 0;
  while (fgets(line, sizeof(line), p) != nullptr) {
    char addr[64], type[8], name[256];
    if (std::sscanf(line, "%63s %7s %255s", addr, type, name) != 3) continue;
    ++count;
    EXPECT_EQ(std::strncmp(name, "cu", 2), 0) << "unexpected export " << name;
    all += std::string(" ") + name + " ";
  }
  pclose(p);
  if (count == 0) GTEST_SKIP() << "nm is not available";
  for (const char* name :
       {"cuInit", "cuMemAlloc", "cuMemAlloc_v2", "cuGetProcAddress", "cuGetProcAddress_v2",
        "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuMemcpyHtoD_v2_ptds", "cuMemPrefetchAsync",
        "cuMemPrefetchAsync_v2", "cuMemDiscardAndPrefetchBatchAsync", "cuCtxCreate_v4",
        "cuEventElapsedTime_v2", "cuMemGetDefaultMemPool"}) {
    EXPECT_NE(all.find(std::string(" ") + name + " "), std::string::npos) << name;
  }
}

TEST(SimgpuScenario, StatsFileHasEveryKey) {
  ChildResult r = RunChild("plain", "SIMGPU_MEMORY=1GiB");
  EXPECT_CHILD_OK(r);
  for (const char* key :
       {"device_capacity_bytes", "peak_resident_bytes", "device_alloc_bytes_peak", "demand_faults",
        "count", "bytes", "prefetched_bytes", "evicted_bytes", "capacity_evicted_bytes",
        "discarded_bytes", "zero_filled_bytes", "kernels_launched", "virtual_seconds"}) {
    EXPECT_NE(r.stats.find(std::string("\"") + key + "\""), std::string::npos) << key;
  }
}

// ---- in-process tests --------------------------------------------------------------------------

class Simgpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleLoad(&module_, SIMGPU_TEST_KERNELS), CUDA_SUCCESS);
  }
  void SetUp() override { ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS); }
  CUfunction Kernel(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, module_, name), CUDA_SUCCESS);
    return f;
  }
  static CUcontext ctx_;
  static CUmodule module_;
};
CUcontext Simgpu::ctx_ = nullptr;
CUmodule Simgpu::module_ = nullptr;

TEST_F(Simgpu, DeviceQueries) {
  int version = 0, count = 0, v = 0;
  EXPECT_EQ(cuDriverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, 13000);
  EXPECT_EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, 1);
  char name[64];
  EXPECT_EQ(cuDeviceGetName(name, sizeof(name), 0), CUDA_SUCCESS);
  EXPECT_EQ(std::strncmp(name, "simgpu", 6), 0);
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0), CUDA_SUCCESS);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0), CUDA_SUCCESS);
  EXPECT_EQ(v, 0);
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(v, 9);
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0), CUDA_SUCCESS);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1), CUDA_ERROR_INVALID_DEVICE);
  size_t total = 0;
  EXPECT_EQ(cuDeviceTotalMem(&total, 0), CUDA_SUCCESS);
  EXPECT_EQ(total, kCapacity);
  CUuuid uuid;
  EXPECT_EQ(cuDeviceGetUuid(&uuid, 0), CUDA_SUCCESS);
}

TEST_F(Simgpu, ContextStack) {
  CUcontext cur = nullptr, created = nullptr, popped = nullptr;
  EXPECT_EQ(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  EXPECT_EQ(cur, ctx_);
  EXPECT_EQ(cuCtxCreate(&created, nullptr, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  EXPECT_EQ(cur, created);
  EXPECT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
  EXPECT_EQ(popped, created);
  EXPECT_EQ(cuCtxDestroy(created), CUDA_SUCCESS);
  CUdevice dev = -1;
  EXPECT_EQ(cuCtxGetDevice(&dev), CUDA_SUCCESS);
  EXPECT_EQ(dev, 0);
  std::thread([] {
    CUdeviceptr p;
    EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
  }).join();
}

TEST_F(Simgpu, CapacityAndOutOfMemory) {
  size_t free0 = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, kCapacity);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc(&a, 16 << 20), CUDA_SUCCESS);
  size_t free1 = 0;
  ASSERT_EQ(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
  EXPECT_EQ(free0 - free1, size_t{16} << 20);
  EXPECT_EQ(cuMemAlloc(&b, kCapacity), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFree(a), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemAlloc(&a, kCapacity), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFree(a), CUDA_SUCCESS);
  CUdeviceptr m = 0;
  ASSERT_EQ(cuMemAllocManaged(&m, 3 * kCapacity, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(m % kChunk, 0u);
  EXPECT_EQ(cuMemFree(m), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  const char* name = nullptr;
  EXPECT_EQ(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &name), CUDA_SUCCESS);
  EXPECT_STREQ(name, "CUDA_ERROR_OUT_OF_MEMORY");
}

TEST_F(Simgpu, PointerAttributes) {
  CUdeviceptr d = 0, m = 0;
  ASSERT_EQ(cuMemAlloc(&d, 1000), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocManaged(&m, 5 << 20, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  unsigned int managed = 7, type = 0;
  EXPECT_EQ(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d + 10), CUDA_SUCCESS);
  EXPECT_EQ(managed, 0u);
  EXPECT_EQ(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 4096),
            CUDA_SUCCESS);
  EXPECT_EQ(managed, 1u);
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, m), CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* data[] = {&start, &size, &managed};
  EXPECT_EQ(cuPointerGetAttributes(3, attrs, data, m + (3 << 20)), CUDA_SUCCESS);
  EXPECT_EQ(start, m);
  EXPECT_EQ(size, size_t{5} << 20);
  EXPECT_EQ(managed, 1u);
  CUdeviceptr base = 0;
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, d + 999), CUDA_SUCCESS);
  EXPECT_EQ(base, d);
  EXPECT_EQ(size, 1000u);
  int host_var = 0;
  CUdeviceptr host = reinterpret_cast<CUdeviceptr>(&host_var);
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, host),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuPointerGetAttributes(3, attrs, data, host), CUDA_SUCCESS);
  EXPECT_EQ(managed, 0u);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(m), CUDA_SUCCESS);
}

TEST_F(Simgpu, MemcpyMemsetRoundTrip) {
  CUdeviceptr d = 0, m = 0;
  std::vector<uint32_t> host(1024, 0);
  ASSERT_EQ(cuMemAlloc(&d, 4096), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32(d, 0xabcd1234u, 1024), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoD(m, d, 4096), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(host.data(), m, 4096), CUDA_SUCCESS);
  for (uint32_t v : host) ASSERT_EQ(v, 0xabcd1234u);
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8Async(d, 7, 4096, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyAsync(m, d, 4096, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(m)[4095], 7);  // the host reads managed memory
  EXPECT_EQ(cuMemcpyHtoD(d, host.data(), 8192), CUDA_ERROR_INVALID_VALUE);  // past the end
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(m), CUDA_SUCCESS);
}

TEST_F(Simgpu, StreamWaitEventOrdersAcrossStreams) {
  CUfunction slow = Kernel("slow_store"), load = Kernel("load");
  CUdeviceptr flag = 0, out = 0;
  ASSERT_EQ(cuMemAllocManaged(&flag, sizeof(int), CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocManaged(&out, sizeof(int), CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32(flag, 0, 1), CUDA_SUCCESS);
  CUstream a, b;
  ASSERT_EQ(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUevent done;
  ASSERT_EQ(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  int* flag_p = reinterpret_cast<int*>(flag);
  int value = 42;
  void* slow_args[] = {&flag_p, &value};
  ASSERT_EQ(cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, a, slow_args, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(a), CUDA_ERROR_NOT_READY);  // 50 ms of real time in the kernel
  ASSERT_EQ(cuEventRecord(done, a), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(b, done, 0), CUDA_SUCCESS);
  int* out_p = reinterpret_cast<int*>(out);
  void* load_args[] = {&flag_p, &out_p};
  ASSERT_EQ(cuLaunchKernel(load, 1, 1, 1, 1, 1, 1, 0, b, load_args, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(b), CUDA_SUCCESS);
  EXPECT_EQ(*out_p, 42);
  EXPECT_EQ(cuEventQuery(done), CUDA_SUCCESS);
  float ms;
  EXPECT_EQ(cuEventElapsedTime(&ms, done, done), CUDA_ERROR_INVALID_HANDLE);  // timing disabled
  EXPECT_EQ(cuEventDestroy(done), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(done), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(b), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(flag), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(out), CUDA_SUCCESS);
}

TEST_F(Simgpu, LegacyStreamSynchronizesWithBlockingStreams) {
  CUfunction slow = Kernel("slow_store"), load = Kernel("load");
  CUdeviceptr flag = 0, out = 0;
  ASSERT_EQ(cuMemAlloc(&flag, sizeof(int)), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&out, sizeof(int)), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32(flag, 0, 1), CUDA_SUCCESS);
  CUstream a;
  ASSERT_EQ(cuStreamCreate(&a, 0), CUDA_SUCCESS);
  int* flag_p = reinterpret_cast<int*>(flag);
  int* out_p = reinterpret_cast<int*>(out);
  int value = 7;
  void* slow_args[] = {&flag_p, &value};
  void* load_args[] = {&flag_p, &out_p};
  ASSERT_EQ(cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, a, slow_args, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(load, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_LEGACY, load_args, nullptr),
            CUDA_SUCCESS);
  int result = 0;
  ASSERT_EQ(cuMemcpyDtoH(&result, out, sizeof(int)), CUDA_SUCCESS);
  EXPECT_EQ(result, 7);
  EXPECT_EQ(cuStreamDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(flag), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(out), CUDA_SUCCESS);
}

TEST_F(Simgpu, KernelTimeOnTheVirtualClock) {
  CUfunction timed = Kernel("timed");
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  CUevent e0, e1;
  ASSERT_EQ(cuEventCreate(&e0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&e1, 0), CUDA_SUCCESS);
  double secs = 1e-3;
  void* args[] = {&secs};
  ASSERT_EQ(cuEventRecord(e0, s), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(timed, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(e1, s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(e1), CUDA_SUCCESS);
  float ms = 0;
  ASSERT_EQ(cuEventElapsedTime(&ms, e0, e1), CUDA_SUCCESS);
  EXPECT_NEAR(ms, 1.0, 1e-4);
  // The `extra` form: the packed buffer is unpacked with the declared offsets.
  double two = 2e-3;
  size_t size = sizeof(two);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &two, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  ASSERT_EQ(cuEventRecord(e0, s), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(timed, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(e1, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventElapsedTime(&ms, e0, e1), CUDA_SUCCESS);
  EXPECT_NEAR(ms, 2.0, 1e-4);
  EXPECT_EQ(cuEventDestroy(e0), CUDA_SUCCESS);
  EXPECT_EQ(cuEventDestroy(e1), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST_F(Simgpu, ModulesAndFunctions) {
  CUmodule m;
  EXPECT_EQ(cuModuleLoad(&m, "/nonexistent/kernels.so"), CUDA_ERROR_FILE_NOT_FOUND);
  EXPECT_EQ(cuModuleLoad(&m, "/etc/hostname"), CUDA_ERROR_INVALID_IMAGE);
  CUfunction f;
  EXPECT_EQ(cuModuleGetFunction(&f, module_, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  f = Kernel("touch_chunks");
  const char* name = nullptr;
  EXPECT_EQ(cuFuncGetName(&name, f), CUDA_SUCCESS);
  EXPECT_STREQ(name, "touch_chunks");
  size_t offset = 0, size = 0;
  EXPECT_EQ(cuFuncGetParamInfo(f, 1, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(offset, 8u);
  EXPECT_EQ(size, 8u);
  EXPECT_EQ(cuFuncGetParamInfo(f, 3, &offset, &size), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(&offset), 1, 1, 1, 1, 1, 1, 0, nullptr,
                           nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(
      cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(&offset), nullptr, nullptr),
      CUDA_ERROR_INVALID_VALUE);  // parameters missing
  // cuLaunchKernelEx with launch geometry.
  CUfunction grid = Kernel("grid_product");
  CUdeviceptr out = 0;
  ASSERT_EQ(cuMemAlloc(&out, 8), CUDA_SUCCESS);
  uint64_t* out_p = reinterpret_cast<uint64_t*>(out);
  void* args[] = {&out_p};
  CUlaunchConfig cfg{};
  cfg.gridDimX = 2, cfg.gridDimY = 3, cfg.gridDimZ = 4;
  cfg.blockDimX = 32, cfg.blockDimY = 2, cfg.blockDimZ = 1;
  ASSERT_EQ(cuLaunchKernelEx(&cfg, grid, args, nullptr), CUDA_SUCCESS);
  uint64_t product = 0;
  ASSERT_EQ(cuMemcpyDtoH(&product, out, 8), CUDA_SUCCESS);
  EXPECT_EQ(product, 24u * 64u);
  EXPECT_EQ(cuMemFree(out), CUDA_SUCCESS);
}

TEST_F(Simgpu, LibrariesAndKernels) {
  CUlibrary lib = nullptr;
  ASSERT_EQ(
      cuLibraryLoadFromFile(&lib, SIMGPU_TEST_KERNELS, nullptr, nullptr, 0, nullptr, nullptr, 0),
      CUDA_SUCCESS);
  CUkernel kernel = nullptr;
  EXPECT_EQ(cuLibraryGetKernel(&kernel, lib, "nope"), CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(cuLibraryGetKernel(&kernel, lib, "grid_product"), CUDA_SUCCESS);
  CUfunction f = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&f, kernel), CUDA_SUCCESS);
  // A CUkernel is a handle of its own; cuFuncGetParamInfo takes only the CUfunction (strict).
  EXPECT_NE(reinterpret_cast<void*>(f), reinterpret_cast<void*>(kernel));
  size_t offset = 1, size = 0;
  EXPECT_EQ(cuFuncGetParamInfo(reinterpret_cast<CUfunction>(kernel), 0, &offset, &size),
            CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(cuKernelGetParamInfo(kernel, 0, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(offset, 0u);
  EXPECT_EQ(size, 8u);
  EXPECT_EQ(cuKernelGetParamInfo(kernel, 1, &offset, &size), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncGetParamInfo(f, 0, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(cuKernelGetParamInfo(reinterpret_cast<CUkernel>(f), 0, &offset, &size),
            CUDA_ERROR_INVALID_HANDLE);
  const char* name = nullptr;
  EXPECT_EQ(cuKernelGetName(&name, kernel), CUDA_SUCCESS);
  EXPECT_STREQ(name, "grid_product");
  EXPECT_EQ(cuFuncGetName(&name, reinterpret_cast<CUfunction>(kernel)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncGetName(&name, f), CUDA_SUCCESS);
  CUdeviceptr out = 0;
  ASSERT_EQ(cuMemAlloc(&out, 8), CUDA_SUCCESS);
  uint64_t* out_p = reinterpret_cast<uint64_t*>(out);
  void* args[] = {&out_p};
  // A CUkernel may be launched as a CUfunction.
  ASSERT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 3, 1, 1, 5, 1, 1, 0, nullptr, args,
                           nullptr),
            CUDA_SUCCESS);
  uint64_t product = 0;
  ASSERT_EQ(cuMemcpyDtoH(&product, out, 8), CUDA_SUCCESS);
  EXPECT_EQ(product, 15u);
  ASSERT_EQ(cuLaunchKernel(f, 2, 1, 1, 5, 1, 1, 0, nullptr, args, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(&product, out, 8), CUDA_SUCCESS);
  EXPECT_EQ(product, 10u);
  EXPECT_EQ(cuMemFree(out), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(reinterpret_cast<CUmodule>(lib)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 1, 1, 1, 0, nullptr, args,
                           nullptr),
            CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(Simgpu, HostCallbacksRunInStreamOrder) {
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  EXPECT_EQ(cuStreamIsCapturing(s, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  static std::vector<int> order;
  order.clear();
  ASSERT_EQ(cuLaunchHostFunc(
                s, [](void*) { order.push_back(1); }, nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(cuStreamAddCallback(
                s, [](CUstream, CUresult, void*) { order.push_back(2); }, nullptr, 0),
            CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST_F(Simgpu, StreamOrderedPoolsIncludingManaged) {
  CUmemoryPool def = nullptr, managed = nullptr, created = nullptr;
  ASSERT_EQ(cuDeviceGetDefaultMemPool(&def, 0), CUDA_SUCCESS);
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_NONE;
  ASSERT_EQ(cuMemGetDefaultMemPool(&managed, &loc, CU_MEM_ALLOCATION_TYPE_MANAGED), CUDA_SUCCESS);
  EXPECT_NE(def, managed);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ASSERT_EQ(cuMemPoolCreate(&created, &props), CUDA_SUCCESS);
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAllocFromPoolAsync(&a, 3 * kCapacity, created, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&b, 1 << 20, s), CUDA_SUCCESS);
  unsigned int is_managed = 9;
  EXPECT_EQ(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a), CUDA_SUCCESS);
  EXPECT_EQ(is_managed, 1u);
  EXPECT_EQ(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, b), CUDA_SUCCESS);
  EXPECT_EQ(is_managed, 0u);
  CUmemoryPool owner = nullptr;
  EXPECT_EQ(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a), CUDA_SUCCESS);
  EXPECT_EQ(owner, created);
  ASSERT_EQ(cuMemFreeAsync(a, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(b, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  CUdeviceptr base;
  EXPECT_EQ(cuMemGetAddressRange(&base, nullptr, a), CUDA_ERROR_NOT_FOUND);  // freed in order
  EXPECT_EQ(cuMemPoolDestroy(created), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
}

// A pool's statistics as the driver keeps them: freed memory stays reserved for reuse until a
// synchronization releases what is above the release threshold, or cuMemPoolTrimTo trims it.
TEST_F(Simgpu, PoolsReportWhatTheyHoldAndReleaseItAboveTheThreshold) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
  props.location.type = CU_MEM_LOCATION_TYPE_NONE;
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
  constexpr cuuint64_t kMiB = 1 << 20;
  // {used, used high, reserved, reserved high}, in MiB.
  auto stats = [&] {
    std::vector<cuuint64_t> values;
    for (CUmemPool_attribute attribute :
         {CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_HIGH,
          CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH}) {
      cuuint64_t value = 1;
      EXPECT_EQ(cuMemPoolGetAttribute(pool, attribute, &value), CUDA_SUCCESS);
      values.push_back(value / kMiB);
    }
    return values;
  };
  using Stats = std::vector<cuuint64_t>;
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(cuMemAllocFromPoolAsync(&a, 3 * kMiB, pool, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocFromPoolAsync(&b, kMiB, pool, s), CUDA_SUCCESS);
  EXPECT_EQ(stats(), (Stats{4, 4, 4, 4}));
  // Threshold 0 (the default): the synchronize releases what the free left.
  ASSERT_EQ(cuMemFreeAsync(a, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(stats(), (Stats{1, 4, 1, 4}));
  // Threshold UINT64_MAX (PyTorch's): kept, and reused by the next allocation.
  cuuint64_t threshold = UINT64_MAX;
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocFromPoolAsync(&c, 2 * kMiB, pool, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(c, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(stats(), (Stats{1, 4, 3, 4}));
  ASSERT_EQ(cuMemAllocFromPoolAsync(&c, kMiB, pool, s), CUDA_SUCCESS);
  EXPECT_EQ(stats(), (Stats{2, 4, 3, 4}));
  // High watermarks reset to the current values, and only by setting zero; the current values
  // are read-only.
  cuuint64_t zero = 0, one = 1;
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero), CUDA_SUCCESS);
  EXPECT_EQ(stats(), (Stats{2, 2, 3, 3}));
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero),
            CUDA_ERROR_INVALID_VALUE);
  // A trim keeps what live allocations use.
  ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(stats(), (Stats{2, 2, 2, 3}));
  ASSERT_EQ(cuMemFreeAsync(b, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(c, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(stats(), (Stats{0, 2, 2, 3}));
  ASSERT_EQ(cuMemPoolTrimTo(pool, kMiB), CUDA_SUCCESS);
  EXPECT_EQ(stats(), (Stats{0, 2, 1, 3}));
  // An allocation made during a capture is the graph's memory, not the pool's.
  ASSERT_EQ(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocFromPoolAsync(&c, 4 * kMiB, pool, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(c, s), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
  EXPECT_EQ(stats(), (Stats{0, 2, 1, 3}));
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPoolDestroy(pool), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST_F(Simgpu, ManyThreadsAtOnce) {
  CUfunction touch = Kernel("touch_chunks");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      if (cuCtxSetCurrent(ctx_) != CUDA_SUCCESS) ++failures;
      CUstream s;
      if (cuStreamCreate(&s, 0) != CUDA_SUCCESS) ++failures;
      for (int i = 0; i < 10; ++i) {
        CUdeviceptr m = 0;
        if (cuMemAllocManaged(&m, 2 * kChunk, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS) ++failures;
        char* p = reinterpret_cast<char*>(m);
        uint64_t stride = kChunk;
        uint32_t count = 2;
        void* args[] = {&p, &stride, &count};
        if (cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr)) ++failures;
        if (cuStreamSynchronize(s) != CUDA_SUCCESS) ++failures;
        if (p[0] != 1 || p[kChunk] != 1) ++failures;  // host reads the kernel's writes
        p[1] = static_cast<char>(t);                  // and writes
        if (cuMemFree(m) != CUDA_SUCCESS) ++failures;
      }
      if (cuStreamDestroy(s) != CUDA_SUCCESS) ++failures;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(Simgpu, PerThreadDefaultStreamThroughProcAddress) {
  using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, unsigned, CUstream, void**, void**);
  using SyncFn = CUresult (*)(CUstream);
  void* launch_ptsz = nullptr;
  void* launch = nullptr;
  void* sync_ptsz = nullptr;
  CUdriverProcAddressQueryResult st;
  ASSERT_EQ(cuGetProcAddress("cuLaunchKernel", &launch_ptsz, 12000,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
            CUDA_SUCCESS);
  ASSERT_EQ(cuGetProcAddress("cuLaunchKernel", &launch, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st),
            CUDA_SUCCESS);
  EXPECT_NE(launch, launch_ptsz);
  EXPECT_EQ(launch, reinterpret_cast<void*>(&cuLaunchKernel));
  ASSERT_EQ(cuGetProcAddress("cuStreamSynchronize", &sync_ptsz, 12000,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
            CUDA_SUCCESS);
  CUfunction timed = Kernel("timed");
  double secs = 1e-6;
  void* args[] = {&secs};
  EXPECT_EQ(
      reinterpret_cast<LaunchFn>(launch_ptsz)(timed, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr),
      CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<SyncFn>(sync_ptsz)(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
}

TEST(SimgpuProcAddress, VersionsVariantsAndMisses) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  // Works before cuInit? cudart calls it first; it needs no initialization.
  ASSERT_EQ(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, &st), CUDA_SUCCESS);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuMemAlloc_v2));
  void* legacy = nullptr;
  ASSERT_EQ(cuGetProcAddress("cuMemAlloc", &legacy, 3010, 0, &st), CUDA_SUCCESS);
  EXPECT_NE(legacy, fn);
  // cudart's bootstrap: cuGetProcAddress itself, at 12000 (5 arguments) and 11030 (4).
  void* gpa_v2 = nullptr;
  void* gpa_v1 = nullptr;
  ASSERT_EQ(cuGetProcAddress("cuGetProcAddress", &gpa_v2, 12000, 0, &st), CUDA_SUCCESS);
  ASSERT_EQ(cuGetProcAddress("cuGetProcAddress", &gpa_v1, 11030, 0, &st), CUDA_SUCCESS);
  EXPECT_EQ(gpa_v2, reinterpret_cast<void*>(&cuGetProcAddress_v2));
  EXPECT_NE(gpa_v1, gpa_v2);
  using GpaV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
  void* via_v1 = nullptr;
  ASSERT_EQ(reinterpret_cast<GpaV1>(gpa_v1)("cuMemFree", &via_v1, 12000, 0), CUDA_SUCCESS);
  EXPECT_EQ(via_v1, reinterpret_cast<void*>(&cuMemFree_v2));
  // Per-thread variants.
  void* ptsz = nullptr;
  ASSERT_EQ(cuGetProcAddress("cuMemcpyHtoDAsync", &ptsz, 12000,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
            CUDA_SUCCESS);
  EXPECT_NE(ptsz, reinterpret_cast<void*>(&cuMemcpyHtoDAsync_v2));
  void* same = nullptr;
  ASSERT_EQ(cuGetProcAddress("cuMemAllocManaged", &same, 12000,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
            CUDA_SUCCESS);
  EXPECT_EQ(same, reinterpret_cast<void*>(&cuMemAllocManaged));
  // Misses.
  EXPECT_EQ(cuGetProcAddress("cuNoSuchThing", &fn, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(cuGetProcAddress("cuMemPoolCreate", &fn, 11000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  const void* table = nullptr;
  CUuuid id{};
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
}

// CUDA 13 changed cuCtxGetDevice and cuCtxSynchronize (cudaTypedefs.h: PFN_*_v13000 take a
// CUcontext): a lookup at 13000 must hand back the new signature and one below it the old, so
// that a caller casting to the wrong one is caught here rather than on a real driver.
TEST_F(Simgpu, ProcAddressFollowsSignatureChangesAtCuda13) {
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  void* get_device_13 = nullptr;
  void* get_device_12 = nullptr;
  ASSERT_EQ(cuGetProcAddress("cuCtxGetDevice", &get_device_13, 13000, 0, &st), CUDA_SUCCESS);
  ASSERT_EQ(cuGetProcAddress("cuCtxGetDevice", &get_device_12, 12000, 0, &st), CUDA_SUCCESS);
  EXPECT_EQ(get_device_13, reinterpret_cast<void*>(&cuCtxGetDevice_v2));
  EXPECT_EQ(get_device_12, reinterpret_cast<void*>(&cuCtxGetDevice));
  CUdevice device = -1;
  using GetDeviceV2 = CUresult (*)(CUdevice*, CUcontext);
  EXPECT_EQ(reinterpret_cast<GetDeviceV2>(get_device_13)(&device, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(device, 0);  // null: the current context's device
  device = -1;
  EXPECT_EQ(reinterpret_cast<GetDeviceV2>(get_device_13)(&device, ctx_), CUDA_SUCCESS);
  EXPECT_EQ(device, 0);
  int not_a_context = 0;
  EXPECT_EQ(reinterpret_cast<GetDeviceV2>(get_device_13)(
                &device, reinterpret_cast<CUcontext>(&not_a_context)),
            CUDA_ERROR_INVALID_CONTEXT);
  device = -1;
  EXPECT_EQ(reinterpret_cast<CUresult (*)(CUdevice*)>(get_device_12)(&device), CUDA_SUCCESS);
  EXPECT_EQ(device, 0);

  void* sync_13 = nullptr;
  void* sync_12 = nullptr;
  ASSERT_EQ(cuGetProcAddress("cuCtxSynchronize", &sync_13, 13000, 0, &st), CUDA_SUCCESS);
  ASSERT_EQ(cuGetProcAddress("cuCtxSynchronize", &sync_12, 12080, 0, &st), CUDA_SUCCESS);
  EXPECT_EQ(sync_13, reinterpret_cast<void*>(&cuCtxSynchronize_v2));
  EXPECT_EQ(sync_12, reinterpret_cast<void*>(&cuCtxSynchronize));
  using SyncV2 = CUresult (*)(CUcontext);
  EXPECT_EQ(reinterpret_cast<SyncV2>(sync_13)(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<SyncV2>(sync_13)(ctx_), CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<SyncV2>(sync_13)(reinterpret_cast<CUcontext>(&not_a_context)),
            CUDA_ERROR_INVALID_CONTEXT);

  // New in 13.0 (PFN_cuMemDiscardBatchAsync_v13000): a 12.8 request finds nothing.
  void* discard = nullptr;
  EXPECT_EQ(cuGetProcAddress("cuMemDiscardBatchAsync", &discard, 12080, 0, &st),
            CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(discard, nullptr);
  EXPECT_EQ(cuGetProcAddress("cuMemDiscardBatchAsync", &discard, 13000, 0, &st), CUDA_SUCCESS);
  EXPECT_NE(discard, nullptr);
  // A version newer than the driver's (13000) is refused, as by a CUDA 12 driver asked for 13000.
  void* newer = nullptr;
  EXPECT_EQ(cuGetProcAddress("cuCtxGetDevice", &newer, 13010, 0, &st), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(newer, nullptr);
}

TEST(SimgpuErrors, NamesAndStrings) {
  const char* s = nullptr;
  EXPECT_EQ(cuGetErrorName(CUDA_SUCCESS, &s), CUDA_SUCCESS);
  EXPECT_STREQ(s, "CUDA_SUCCESS");
  EXPECT_EQ(cuGetErrorName(CUDA_ERROR_INVALID_HANDLE, &s), CUDA_SUCCESS);
  EXPECT_STREQ(s, "CUDA_ERROR_INVALID_HANDLE");
  EXPECT_EQ(cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &s), CUDA_SUCCESS);
  EXPECT_STREQ(s, "CUDA_ERROR_NOT_INITIALIZED");
  EXPECT_EQ(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
  EXPECT_STREQ(s, "out of memory");
  EXPECT_EQ(cuGetErrorName(static_cast<CUresult>(123456), &s), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--scenario") == 0) return RunScenario(argv[2]);
  setenv("SIMGPU_MEMORY", "64MiB", 1);
  unsetenv("SIMGPU_STATS");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
