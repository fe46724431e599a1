// The replayer: runs a ReplayTrace's steps on a ReplayDevice in order, then its last step again
// until the run has as many training steps as asked. A step run again makes new tensors at the
// same places; what it frees or touches of what the step before it made is what the run's
// previous step made at the same place, so the two last recorded steps must match
// (StepDifference). Each op becomes one launch (several where it has more accesses than the
// largest kernel takes, its time shared by bytes); a byte an op reads before any op wrote it is
// written instead (written_ranges.h). At the end every live tensor's written bytes are read once
// more into the digest's final lane.
#ifndef SPILLWAY_WORKLOADS_REPLAY_REPLAYER_H_
#define SPILLWAY_WORKLOADS_REPLAY_REPLAYER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "workloads/replay/replay_device.h"
#include "workloads/replay/replay_trace.h"
#include "workloads/replay/written_ranges.h"

namespace spillway::replay {

struct ReplayPlanOptions {
  int steps = 4;  // training steps to run (the prologue, if any, is not one)
  int touch = spillway_replay::kTouchPage;  // kTouchAll or a stride's log2 (replay_kernel_abi.h)
  // Test-only: after the launch numbered this (1-based), invert one checked byte it wrote.
  uint64_t flip_after_launch = 0;
};

struct ReplayCounts {
  uint64_t launches = 0;           // kernel launches, the final sweep's included
  uint64_t split_ops = 0;          // ops with more accesses than one launch takes
  uint64_t first_touch_bytes = 0;  // bytes read before written, written instead
  uint64_t allocations = 0;
  uint64_t peak_live_bytes = 0;  // over the run, as the trace's sizes (not the device's)
  std::string flipped;           // what the test-only flip changed, in words; "" if none
};

class Replayer {
 public:
  // REQUIRES: `trace` outlives the replayer.
  Replayer(const ReplayTrace& trace, const ReplayPlanOptions& options);

  // The stretches the run goes through (the trace's prologue, if it has one, then the training
  // steps), and the index into trace.steps each one runs.
  const std::vector<uint32_t>& stretches() const { return stretches_; }
  // Whether stretch i is a training step.
  bool IsStep(size_t i) const { return !(trace_.first_is_prologue && i == 0); }

  // Checks that the run can be made: "" or why not, in one line (no device needed).
  std::string Refusal() const;

  // Runs every stretch on `device` (ending each with device->EndStretch), then the final sweep,
  // then frees what is live. Errors name the event at fault.
  absl::Status Run(ReplayDevice* device);
  const ReplayCounts& counts() const { return counts_; }

 private:
  struct LiveTensor {
    uint64_t address = 0;
    uint64_t bytes = 0;
    uint64_t tag = 0;
    WrittenRanges written;
  };
  struct Piece {
    uint64_t tensor_key;
    uint64_t offset;
    uint64_t bytes;
    uint32_t mode;
  };

  static uint64_t Key(uint32_t stretch, uint32_t index) {
    return (uint64_t{stretch} << 32) | index;
  }
  // The key of `ref` seen from stretch `run` running trace step `recorded`.
  static uint64_t Resolve(TensorRef ref, uint32_t run, uint32_t recorded);
  absl::Status RunStretch(ReplayDevice* device, uint32_t run);
  absl::Status RunOp(ReplayDevice* device, const ReplayEvent& event, uint32_t run,
                     uint32_t recorded);
  absl::Status LaunchPieces(ReplayDevice* device, const std::vector<Piece>& pieces,
                            uint64_t time_ns, int lane, uint32_t kernel);
  absl::Status FinalSweep(ReplayDevice* device);
  absl::Status Flip(ReplayDevice* device, const std::vector<Piece>& pieces, size_t first,
                    size_t count);
  std::string Where(const ReplayEvent& event, uint32_t run, uint32_t recorded) const;

  const ReplayTrace& trace_;
  ReplayPlanOptions options_;
  std::vector<uint32_t> stretches_;
  absl::flat_hash_map<uint64_t, LiveTensor> live_;
  uint64_t live_bytes_ = 0;
  uint64_t sequence_ = 0;
  ReplayCounts counts_;
};

}  // namespace spillway::replay

#endif  // SPILLWAY_WORKLOADS_REPLAY_REPLAYER_H_
