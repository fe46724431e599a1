// The replayer (workloads/replay/replayer.h) against a device that records what it is asked:
// the stretches run, the last step repeated with what the step before made mapped to the run's
// previous step, every tensor freed once, ops split over launches, bytes read before written
// written instead, the final sweep, and the refusals.
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/workloads/replay_test_trace.h"
#include "workloads/replay/replayer.h"

namespace spillway::replay {
namespace {

using spillway_replay::ExtentBytes;
using spillway_replay::ExtentMode;
using spillway_replay::KeyOffset;
using spillway_replay::ReplaySlot;
using testing::TestTraceOptions;

struct Launched {
  std::vector<ReplaySlot> slots;
  uint64_t sequence;
  uint64_t time_ns;
  int lane;
};

// Records every call; fails the test on a free of something not live.
class RecordingDevice : public ReplayDevice {
 public:
  absl::StatusOr<uint64_t> Allocate(uint64_t bytes) override {
    const uint64_t address = next_;
    next_ += bytes + 4096;
    live_[address] = bytes;
    live_bytes_ += bytes;
    peak_ = std::max(peak_, live_bytes_);
    ++allocations;
    return address;
  }
  absl::Status Free(uint64_t address, uint64_t bytes) override {
    const auto found = live_.find(address);
    EXPECT_NE(found, live_.end()) << address;
    if (found == live_.end()) return absl::InternalError("not live");
    EXPECT_EQ(found->second, bytes);
    live_bytes_ -= bytes;
    live_.erase(found);
    return absl::OkStatus();
  }
  absl::Status Launch(absl::Span<const ReplaySlot> slots, uint64_t sequence, uint64_t time_ns,
                      int lane, uint32_t /*kernel*/) override {
    for (const ReplaySlot& slot : slots) {
      // Every pointer lies inside a live tensor, with its bytes.
      auto it = live_.upper_bound(slot.pointer);
      EXPECT_NE(it, live_.begin());
      --it;
      EXPECT_LE(slot.pointer + ExtentBytes(slot.extent), it->first + it->second);
      EXPECT_EQ(slot.pointer - it->first, KeyOffset(slot.key));
    }
    launches.push_back({{slots.begin(), slots.end()}, sequence, time_ns, lane});
    return absl::OkStatus();
  }
  absl::Status EndStretch(int index) override {
    stretch_ends.push_back(index);
    stretch_launches.push_back(launches.size());
    return absl::OkStatus();
  }
  absl::Status FlipByte(uint64_t address) override {
    flipped.push_back(address);
    return absl::OkStatus();
  }

  std::vector<Launched> launches;
  std::vector<int> stretch_ends;
  std::vector<size_t> stretch_launches;  // launches made when each stretch ended
  std::vector<uint64_t> flipped;
  uint64_t allocations = 0;
  size_t live() const { return live_.size(); }
  uint64_t peak() const { return peak_; }

 private:
  uint64_t next_ = 1ull << 40;
  std::map<uint64_t, uint64_t> live_;
  uint64_t live_bytes_ = 0;
  uint64_t peak_ = 0;
};

ReplayTrace Read(const TestTraceOptions& options) {
  const std::string path =
      ::testing::TempDir() + "/replay_replayer_test." + std::to_string(::getpid());
  EXPECT_TRUE(testing::WriteTestTrace(path, options).ok());
  absl::StatusOr<ReplayTrace> trace = ReadReplayTrace(path);
  EXPECT_TRUE(trace.ok()) << trace.status();
  std::remove(path.c_str());
  return trace.ok() ? *std::move(trace) : ReplayTrace();
}

TEST(Replayer, RunsTheRecordedStepsThenRepeatsTheLast) {
  TestTraceOptions options;
  options.layers = 3;
  const ReplayTrace trace = Read(options);
  ReplayPlanOptions plan;
  plan.steps = 7;
  Replayer replayer(trace, plan);
  EXPECT_EQ(replayer.Refusal(), "");
  EXPECT_EQ(replayer.stretches(), (std::vector<uint32_t>{0, 1, 2, 3, 3, 3, 3}));
  RecordingDevice device;
  ASSERT_TRUE(replayer.Run(&device).ok());
  EXPECT_EQ(device.stretch_ends, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  // Every tensor made was freed once (the device fails the test otherwise), the last ones after
  // the final sweep.
  EXPECT_EQ(device.live(), 0u);
  EXPECT_EQ(replayer.counts().allocations, device.allocations);
  // The repeated steps free the previous repetition's gradients: live bytes never grow beyond
  // the trace's peak.
  EXPECT_EQ(device.peak(), trace.peak_live_bytes);
  EXPECT_EQ(replayer.counts().peak_live_bytes, trace.peak_live_bytes);
  // Steps 2 to 7 launch the same count; the final sweep reads what is live in lane 1.
  const size_t per_step = device.stretch_launches[2] - device.stretch_launches[1];
  for (size_t s = 2; s < 7; ++s) {
    EXPECT_EQ(device.stretch_launches[s] - device.stretch_launches[s - 1], per_step) << s;
  }
  ASSERT_GT(device.launches.size(), device.stretch_launches.back());
  EXPECT_EQ(device.launches.back().lane, spillway_replay::kLaneFinal);
  EXPECT_EQ(device.launches.back().time_ns, 0u);
  // Launches are numbered 1, 2, ...
  for (size_t i = 0; i < device.launches.size(); ++i) {
    EXPECT_EQ(device.launches[i].sequence, i + 1);
  }
}

TEST(Replayer, FewerStepsThanRecordedRunsOnlyThose) {
  const ReplayTrace trace = Read(TestTraceOptions());
  ReplayPlanOptions plan;
  plan.steps = 2;
  Replayer replayer(trace, plan);
  EXPECT_EQ(replayer.stretches(), (std::vector<uint32_t>{0, 1}));
  RecordingDevice device;
  ASSERT_TRUE(replayer.Run(&device).ok());
  EXPECT_EQ(device.live(), 0u);
}

TEST(Replayer, RefusesToRepeatALastStepUnlikeTheOneBefore) {
  TestTraceOptions options;
  options.last_step_differs = true;
  const ReplayTrace trace = Read(options);
  ReplayPlanOptions plan;
  plan.steps = 4;
  EXPECT_EQ(Replayer(trace, plan).Refusal(), "");
  plan.steps = 5;
  Replayer replayer(trace, plan);
  EXPECT_NE(replayer.Refusal().find("cannot repeat the last recorded step to run 5 steps: its "
                                    "last two steps differ (one has 70 allocations, frees and "
                                    "launches, the other 71)"),
            std::string::npos)
      << replayer.Refusal();
  RecordingDevice device;
  EXPECT_FALSE(replayer.Run(&device).ok());
  EXPECT_TRUE(device.launches.empty());

  options = TestTraceOptions();
  options.steps = 1;
  const ReplayTrace one = Read(options);
  EXPECT_NE(Replayer(one, plan).Refusal().find("the trace has 1 training step"), std::string::npos);
}

TEST(Replayer, AnOpWithMoreAccessesThanAKernelTakesIsSplitWithItsTimeShared) {
  TestTraceOptions options;
  options.layers = 22;  // the optimizer op touches 66 tensors
  options.steps = 1;
  options.foreach_optimizer = true;
  options.tensor_bytes = 8192;
  const ReplayTrace trace = Read(options);
  ReplayPlanOptions plan;
  plan.steps = 1;
  Replayer replayer(trace, plan);
  RecordingDevice device;
  ASSERT_TRUE(replayer.Run(&device).ok());
  EXPECT_EQ(replayer.counts().split_ops, 1u);
  // The last two launches of the step: 64 slots, then 2; their times add up to the op's.
  const size_t end = device.stretch_launches[0];
  const Launched& a = device.launches[end - 2];
  const Launched& b = device.launches[end - 1];
  EXPECT_EQ(a.slots.size(), 64u);
  EXPECT_EQ(b.slots.size(), 2u);
  EXPECT_EQ(a.time_ns + b.time_ns, options.op_ns);
  EXPECT_EQ(a.time_ns, options.op_ns * 64 / 66);
}

TEST(Replayer, BytesReadBeforeAnyOpWroteThemAreWrittenInstead) {
  TestTraceOptions options;
  options.layers = 2;
  options.steps = 1;
  options.modes = false;  // every access read-write, fresh tensors too
  options.tensor_bytes = 8192;
  const ReplayTrace trace = Read(options);
  ReplayPlanOptions plan;
  plan.steps = 1;
  Replayer replayer(trace, plan);
  RecordingDevice device;
  ASSERT_TRUE(replayer.Run(&device).ok());
  // The first launch initializes weight 0: written, not read.
  ASSERT_EQ(device.launches[0].slots.size(), 1u);
  EXPECT_EQ(ExtentMode(device.launches[0].slots[0].extent), spillway_replay::kModeWrite);
  // load_hi writes the input's second half; forward then reads the input whole: read-write.
  EXPECT_GT(replayer.counts().first_touch_bytes, 0u);
  const Launched& forward = device.launches[4];
  ASSERT_EQ(forward.slots.size(), 3u);
  EXPECT_EQ(ExtentMode(forward.slots[0].extent), spillway_replay::kModeReadWrite);
  EXPECT_EQ(ExtentMode(forward.slots[2].extent), spillway_replay::kModeWrite);
}

TEST(Replayer, APartlyWrittenRangeIsReadWhereWrittenAndWrittenElsewhere) {
  TestTraceOptions options;
  options.layers = 1;
  options.steps = 1;
  options.modes = false;
  options.tensor_bytes = 8192;
  const ReplayTrace trace = Read(options);
  ReplayPlanOptions plan;
  plan.steps = 1;
  Replayer replayer(trace, plan);
  RecordingDevice device;
  ASSERT_TRUE(replayer.Run(&device).ok());
  // Launch 2 (load_lo) touches [0, 4096) of the fresh input: written. Launch 3 (load_hi)
  // touches [4096, 8192): written too. Both were read-write in the trace.
  EXPECT_EQ(ExtentMode(device.launches[1].slots[0].extent), spillway_replay::kModeWrite);
  EXPECT_EQ(KeyOffset(device.launches[2].slots[0].key), 4096u);
  EXPECT_EQ(ExtentMode(device.launches[2].slots[0].extent), spillway_replay::kModeWrite);
}

TEST(Replayer, TheTestOnlyFlipInvertsACheckedByteTheLaunchWrote) {
  TestTraceOptions options;
  options.layers = 1;
  options.steps = 1;
  options.tensor_bytes = 3 * 4096;
  const ReplayTrace trace = Read(options);
  ReplayPlanOptions plan;
  plan.steps = 1;
  plan.flip_after_launch = 3;  // load_hi: [6144, 12288) of the input, written
  Replayer replayer(trace, plan);
  RecordingDevice device;
  ASSERT_TRUE(replayer.Run(&device).ok());
  ASSERT_EQ(device.flipped.size(), 1u);
  // touch=page checks the 8 bytes at each 4 KiB of the tensor: the first in the range is 8192.
  const ReplaySlot& slot = device.launches[2].slots[0];
  EXPECT_EQ(device.flipped[0], slot.pointer - KeyOffset(slot.key) + 8192);
  EXPECT_NE(replayer.counts().flipped.find("offset 8192"), std::string::npos);

  // A launch the run does not reach is an error, not a run that silently checks nothing.
  plan.flip_after_launch = 100000;
  Replayer beyond(trace, plan);
  RecordingDevice other;
  const absl::Status status = beyond.Run(&other);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("--flip-after-launch 100000: the run has"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace spillway::replay
