// The lookahead sized from observed times: LookaheadSizer's arithmetic, LaunchTimer's
// non-blocking reads of timing events, and the residency engine using both over the fake device
// (deeper lookahead when kernels are long next to the transfers they hide, none beyond what
// fits, never waiting for an event).
#include "policy/engine/lookahead_sizer.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"
#include "policy/engine/launch_timer.h"
#include "policy/engine/residency_engine.h"
#include "tests/policy/fake_device.h"

namespace spillway::policy {
namespace {

using testing::DeviceCall;
using testing::FakeDevice;

constexpr uint64_t kMiB = 1ull << 20;
Stream const kStream = reinterpret_cast<Stream>(0x5);

TEST(LookaheadSizerTest, WithoutKernelTimesUsesTheUntimedCount) {
  LookaheadSizer sizer;
  EXPECT_EQ(sizer.Window(10, 8, {}), 0u);
  EXPECT_EQ(sizer.Window(10, 8, std::vector<uint64_t>(20, kMiB)), LookaheadSizer::kUntimedLaunches);
  EXPECT_EQ(sizer.Window(10, 8, std::vector<uint64_t>(2, kMiB)), 2u);
  EXPECT_DOUBLE_EQ(sizer.bytes_per_second(), LookaheadSizer::kDefaultBytesPerSecond);
}

TEST(LookaheadSizerTest, KernelTimeComesFromTheSamePositionOneStepEarlier) {
  LookaheadSizer sizer;
  for (uint64_t launch = 0; launch < 8; ++launch) sizer.AddKernelTime(launch, 1e-3 * (launch + 1));
  EXPECT_NEAR(sizer.KernelSeconds(8 + 3, 8), 4e-3, 1e-9);   // launch 3's
  EXPECT_NEAR(sizer.KernelSeconds(16 + 5, 8), 6e-3, 1e-9);  // two steps back
  // A position never observed: the running mean (between the smallest and largest sample).
  const double mean = sizer.KernelSeconds(100, 0);
  EXPECT_GT(mean, 1e-3);
  EXPECT_LT(mean, 8e-3);
  sizer.AddKernelTime(9, -1);  // not a time
  EXPECT_NEAR(sizer.KernelSeconds(17, 8), 2e-3, 1e-9);
}

TEST(LookaheadSizerTest, BandwidthIsObservedEachWayOnceTransfersAreSeen) {
  LookaheadSizer sizer;
  sizer.AddTransfer(4096, 1e-3, true);  // too small to tell the bandwidth
  EXPECT_DOUBLE_EQ(sizer.bytes_per_second(), LookaheadSizer::kDefaultBytesPerSecond);
  sizer.AddTransfer(100 * kMiB, 100 * kMiB / 40e9, true);
  EXPECT_NEAR(sizer.bytes_per_second(), 40e9, 1e6);
  EXPECT_DOUBLE_EQ(sizer.write_back_bytes_per_second(), LookaheadSizer::kDefaultBytesPerSecond);
  sizer.AddTransfer(100 * kMiB, 100 * kMiB / 50e9, false);
  EXPECT_NEAR(sizer.write_back_bytes_per_second(), 50e9, 1e6);
  EXPECT_NEAR(sizer.bytes_per_second(), 40e9, 1e6);
  sizer.AddTransfer(10 * kMiB, 0, true);  // no time: ignored
  EXPECT_NEAR(sizer.bytes_per_second(), 40e9, 1e6);
}

// Every launch `kernel_seconds` long; 40 GB/s each way, so a byte costs 1/40e9 + 1/40e9 s (room
// written back, then the byte brought in): 4 MiB about 210 µs.
LookaheadSizer SizerWithKernels(double kernel_seconds, uint64_t period) {
  LookaheadSizer sizer;
  for (uint64_t launch = 0; launch < period; ++launch) sizer.AddKernelTime(launch, kernel_seconds);
  sizer.AddTransfer(400 * kMiB, 400 * kMiB / 40e9, true);
  sizer.AddTransfer(400 * kMiB, 400 * kMiB / 40e9, false);
  return sizer;
}

TEST(LookaheadSizerTest, DeeperWhenKernelsAreShortNextToTheirTransfers) {
  const std::vector<uint64_t> needed(16, 4 * kMiB);
  // 4 MiB takes ~210 µs: 10 µs kernels cannot hide any of it, the whole window must move now.
  EXPECT_EQ(SizerWithKernels(10e-6, 32).Window(32, 32, needed), 16u);
  // 1 ms kernels hide each launch's transfer behind the one kernel before it: the next launch.
  EXPECT_EQ(SizerWithKernels(1e-3, 32).Window(32, 32, needed), 1u);
  // 150 µs kernels: launch d's bytes (d × 210 µs) exceed d × 150 µs of compute for every d.
  EXPECT_EQ(SizerWithKernels(150e-6, 32).Window(32, 32, needed), 16u);
  // 300 µs kernels cover them: the next launch only.
  EXPECT_EQ(SizerWithKernels(300e-6, 32).Window(32, 32, needed), 1u);
}

TEST(LookaheadSizerTest, ReachesTheFarthestLaunchWhoseBytesCannotBeHidden) {
  // 100 µs kernels; launches 1..8 need nothing but launch 6 needs 40 MiB (~2 ms at 40 GB/s each
  // way): its transfer must start now although the launches before it need nothing.
  std::vector<uint64_t> needed(8, 0);
  needed[5] = 40 * kMiB;
  EXPECT_EQ(SizerWithKernels(100e-6, 32).Window(32, 32, needed), 6u);
  // With 1 ms kernels the 6 launches before it hide it: only the next launch.
  EXPECT_EQ(SizerWithKernels(1e-3, 32).Window(32, 32, needed), 1u);
}

TEST(LaunchTimerTest, KernelIntervalsAreReadOnlyOnceComplete) {
  FakeDevice device;
  device.events_complete = false;
  LaunchTimer timer(&device);
  std::vector<LaunchTimer::Sample> samples;
  device.clock_ms = 1.0;
  timer.LaunchArrived(1, kStream);
  timer.KernelReady(1, kStream);
  device.clock_ms = 1.5;  // launch 1's kernel took 0.5 ms
  timer.LaunchArrived(2, kStream);
  timer.KernelReady(2, kStream);
  timer.Poll(&samples);
  EXPECT_TRUE(samples.empty());  // not complete: asked, not waited for
  EXPECT_GT(device.queries, 0);
  EXPECT_EQ(device.elapsed_reads, 0);
  device.events_complete = true;
  timer.Poll(&samples);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].kind, LaunchTimer::Kind::kKernel);
  EXPECT_EQ(samples[0].key, 1u);
  EXPECT_NEAR(samples[0].seconds, 0.5e-3, 1e-9);
  // A launch that does not follow the open one (another thread's launch came between) gives no
  // sample.
  timer.LaunchArrived(4, kStream);
  samples.clear();
  timer.Poll(&samples);
  EXPECT_TRUE(samples.empty());
}

// The job's launches far ahead of the device (every entry in flight): a new interval is not timed,
// and the intervals in flight give their samples once complete, oldest first (none lost to
// reuse); after kMaxRefused refusals in a row the oldest is reused, so an event that never
// completes cannot stop the timing for good.
TEST(LaunchTimerTest, AllIntervalsInFlightKeepTheirSamplesNewOnesAreNotTimed) {
  FakeDevice device;
  device.events_complete = false;
  LaunchTimer timer(&device);
  const uint64_t n = LaunchTimer::kEntries + 10;
  for (uint64_t stamp = 1; stamp <= n; ++stamp) {
    device.clock_ms = static_cast<double>(stamp);  // each kernel 1 ms
    timer.LaunchArrived(stamp, kStream);
    timer.KernelReady(stamp, kStream);
  }
  EXPECT_EQ(timer.BeginTransfer(kStream), -1);  // no entry free
  device.events_complete = true;
  std::vector<LaunchTimer::Sample> samples;
  for (size_t i = 0; i < 2 * LaunchTimer::kEntries / LaunchTimer::kMaxHarvest; ++i) {
    timer.Poll(&samples);
  }
  // Launches 1 .. kEntries - 1 were closed by the next launch; launch kEntries's interval was
  // closed by launch kEntries + 1, which itself was not timed.
  ASSERT_EQ(samples.size(), LaunchTimer::kEntries);
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].key, i + 1);
    EXPECT_NEAR(samples[i].seconds, 1e-3, 1e-9);
  }

  device.events_complete = false;
  LaunchTimer stuck(&device);
  for (uint64_t stamp = 1; stamp <= LaunchTimer::kEntries; ++stamp) {
    stuck.LaunchArrived(stamp, kStream);
    stuck.KernelReady(stamp, kStream);
  }
  for (int i = 1; i < LaunchTimer::kMaxRefused; ++i) ASSERT_EQ(stuck.BeginTransfer(kStream), -1);
  EXPECT_GE(stuck.BeginTransfer(kStream), 0);  // the oldest, reused
}

// Step marks: two marks with consecutive tags give the device time between them once both are
// complete; a skipped tag (the job left its step between) gives none; with every mark in flight
// the oldest is dropped.
TEST(LaunchTimerTest, StepMarksWithConsecutiveTagsGiveStepTimes) {
  FakeDevice device;
  device.events_complete = false;
  LaunchTimer timer(&device);
  std::vector<LaunchTimer::Sample> samples;
  device.clock_ms = 10;
  timer.StepMark(1, kStream);
  device.clock_ms = 15;
  timer.StepMark(2, kStream);
  timer.Poll(&samples);
  EXPECT_TRUE(samples.empty());  // not complete yet
  device.events_complete = true;
  device.clock_ms = 22;
  timer.StepMark(3, kStream);
  device.clock_ms = 40;
  timer.StepMark(5, kStream);  // 4 skipped: 3 .. 5 is no step
  device.clock_ms = 43;
  timer.StepMark(6, kStream);
  timer.Poll(&samples);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].kind, LaunchTimer::Kind::kStep);
  EXPECT_EQ(samples[0].key, 1u);
  EXPECT_NEAR(samples[0].seconds, 5e-3, 1e-9);
  EXPECT_EQ(samples[1].key, 2u);
  EXPECT_NEAR(samples[1].seconds, 7e-3, 1e-9);
  EXPECT_EQ(samples[2].key, 5u);
  EXPECT_NEAR(samples[2].seconds, 3e-3, 1e-9);
  samples.clear();
  timer.Poll(&samples);  // mark 6 waits for the next
  EXPECT_TRUE(samples.empty());

  device.events_complete = false;
  LaunchTimer full(&device);
  for (uint64_t tag = 1; tag <= LaunchTimer::kMarks + 2; ++tag) {
    device.clock_ms = static_cast<double>(tag * tag);
    full.StepMark(tag, kStream);
  }
  device.events_complete = true;
  full.Poll(&samples);
  // Marks 1 and 2 were dropped for the last two: steps 3 .. kMarks + 1 remain.
  ASSERT_EQ(samples.size(), LaunchTimer::kMarks - 1);
  EXPECT_EQ(samples[0].key, 3u);
  EXPECT_NEAR(samples[0].seconds, (16 - 9) * 1e-3, 1e-9);
}

TEST(LaunchTimerTest, TransferIntervalsAndAnUntimedDevice) {
  FakeDevice device;
  device.h2d_bytes_per_ms = 40e6;  // 40 GB/s
  Stream const side = reinterpret_cast<Stream>(0x9);
  LaunchTimer timer(&device);
  const int handle = timer.BeginTransfer(side);
  ASSERT_GE(handle, 0);
  device.PrefetchToDevice(0x1000, 80'000'000, side);
  timer.EndTransfer(handle, 80'000'000, true, side);
  std::vector<LaunchTimer::Sample> samples;
  timer.Poll(&samples);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].kind, LaunchTimer::Kind::kToDevice);
  EXPECT_EQ(samples[0].key, 80'000'000u);
  EXPECT_NEAR(samples[0].seconds, 2e-3, 1e-7);

  FakeDevice untimed;
  untimed.can_time = false;
  LaunchTimer none(&untimed);
  none.KernelReady(1, kStream);
  none.LaunchArrived(2, kStream);
  EXPECT_EQ(none.BeginTransfer(side), -1);
  EXPECT_FALSE(none.usable());
  EXPECT_TRUE(untimed.Calls("record").empty());
}

// A cyclic step of `count` allocations of 4 MiB, one per launch, in a budget of `budget_mib`;
// the fake's clock advances `kernel_ms` per launch. Returns the largest distance (in launches)
// between a lookahead prefetch and the launch that uses its allocation, over the last steps.
struct ScanResult {
  uint64_t farthest = 0;
  uint64_t window = 0;
  bool over_budget = false;
  int failures = 0;
};
ScanResult RunScan(FakeDevice* device, double kernel_ms, uint64_t budget_mib, int count = 12,
                   int steps = 12, uint64_t fixed_mib = 0, int forget_at = -1) {
  AllocationRegistry registry;
  ResidencyEngine engine(
      device, MakeLearnedPolicy(), budget_mib * kMiB,
      EngineOptions{
          .lookahead_launches = 64, .residency_granule = 1, .size_lookahead_from_time = true});
  std::vector<Allocation> all;
  for (int i = 0; i < count; ++i) {
    uint64_t address = 0;
    device->AllocateManaged(&address, 4 * kMiB);
    all.push_back(registry.Insert(address, 4 * kMiB, Backing::kManaged, false, true));
    engine.OnAllocated(all.back());
  }
  // Plain device memory holding part of the budget, given back at launch `forget_at`.
  Allocation fixed;
  if (fixed_mib != 0) {
    uint64_t address = 0;
    device->AllocateDevice(&address, fixed_mib * kMiB);
    fixed = registry.Insert(address, fixed_mib * kMiB, Backing::kDevice, false, true);
    engine.OnAllocated(fixed);
  }
  ScanResult result;
  for (int launch = 0; launch < count * steps; ++launch) {
    if (launch == forget_at) engine.Forget(fixed);
    const size_t begin = device->calls.size();
    result.failures +=
        engine.OnLaunch(AccessSet{all[static_cast<size_t>(launch % count)]}, kStream);
    device->clock_ms += kernel_ms;
    if (engine.resident_estimate() > engine.budget_bytes()) result.over_budget = true;
    if (launch < count * (steps - 3)) continue;
    for (size_t c = begin; c < device->calls.size(); ++c) {
      const DeviceCall& call = device->calls[c];
      if (call.what != "to_device" || call.stream == kStream) continue;
      for (uint64_t d = 1; d <= static_cast<uint64_t>(count); ++d) {
        if (all[static_cast<size_t>((launch + d) % count)].base == call.address) {
          result.farthest = std::max(result.farthest, d);
          break;
        }
      }
    }
    result.window = std::max(result.window, engine.lookahead_window());
  }
  return result;
}

TEST(TimedLookaheadTest, LongKernelsNeedOnlyTheNextLaunchAhead) {
  FakeDevice device;
  // 5 ms kernels hide a 4 MiB transfer (~170 µs at the default 25 GB/s) many times over.
  const ScanResult result = RunScan(&device, 5.0, 32);
  EXPECT_EQ(result.failures, 0);
  EXPECT_FALSE(result.over_budget);
  EXPECT_EQ(result.window, 1u);
  EXPECT_EQ(result.farthest, 1u);
  EXPECT_GT(device.elapsed_reads, 0);  // the kernel times were observed
}

TEST(TimedLookaheadTest, ShortKernelsSizeADeepWindowButEvictOnlyForTheNearestLaunches) {
  FakeDevice device;
  // 10 µs kernels hide nothing: every launch in reach has to be on its way (a deep window), but on
  // a full device room is made by eviction only for the next 2 launches' data. 12 allocations of
  // 4 MiB, 32 MiB of budget.
  const ScanResult result = RunScan(&device, 0.01, 32);
  EXPECT_EQ(result.failures, 0);
  EXPECT_FALSE(result.over_budget);
  EXPECT_GE(result.window, 6u);
  EXPECT_EQ(result.farthest, 2u);
}

TEST(TimedLookaheadTest, FreeRoomIsFilledFurtherAheadWithoutEvicting) {
  FakeDevice device;
  // Long kernels (a window of 1), but 8 MiB of device memory given back in the last steps: the
  // lookahead fills that room with the data of launches further ahead, within the budget.
  const ScanResult result = RunScan(&device, 5.0, 40, 12, 12, 8, 12 * 10 + 3);
  EXPECT_EQ(result.failures, 0);
  EXPECT_FALSE(result.over_budget);
  EXPECT_EQ(result.window, 1u);
  EXPECT_GE(result.farthest, 3u);

  FakeDevice never_freed;
  const ScanResult full = RunScan(&never_freed, 5.0, 40, 12, 12, 8);
  EXPECT_EQ(full.farthest, 1u);
}

TEST(TimedLookaheadTest, NeverWaitsForAnEventAndFallsBackWhenTimesAreUnknown) {
  FakeDevice device;
  device.events_complete = false;  // no timing event ever completes
  const ScanResult result = RunScan(&device, 0.01, 32);
  EXPECT_EQ(result.failures, 0);
  EXPECT_FALSE(result.over_budget);
  EXPECT_GT(device.queries, 0);
  EXPECT_EQ(device.elapsed_reads, 0);  // never read an incomplete event
  EXPECT_EQ(result.window, LookaheadSizer::kUntimedLaunches);

  FakeDevice untimed;
  untimed.can_time = false;
  const ScanResult fallback = RunScan(&untimed, 0.01, 32);
  EXPECT_EQ(fallback.failures, 0);
  EXPECT_EQ(fallback.window, LookaheadSizer::kUntimedLaunches);
  EXPECT_GE(fallback.farthest, 2u);
}

}  // namespace
}  // namespace spillway::policy
