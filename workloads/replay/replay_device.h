// What the replayer asks of a device: tensors, one kernel launch per op (or per part of an op),
// step boundaries, and (for tests of the verification) one corrupted byte. The driver-API one is
// driver_device.h; the replayer first runs against NullReplayDevice (nothing but addresses), so
// that a trace that cannot be replayed is refused before any work is done.
#ifndef SPILLWAY_WORKLOADS_REPLAY_REPLAY_DEVICE_H_
#define SPILLWAY_WORKLOADS_REPLAY_REPLAY_DEVICE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "workloads/replay/replay_kernel_abi.h"

namespace spillway::replay {

class ReplayDevice {
 public:
  virtual ~ReplayDevice() = default;

  // A tensor of `bytes` (> 0): its address.
  virtual absl::StatusOr<uint64_t> Allocate(uint64_t bytes) = 0;
  // Frees the tensor at `address` (of `bytes`), after the work launched so far.
  virtual absl::Status Free(uint64_t address, uint64_t bytes) = 0;
  // Launches the kernel for `slots` (at most kMaxSlots; their pointers are tensors' addresses
  // plus offsets), numbered `sequence`, lasting `time_ns`, adding into digest lane `lane`.
  // `kernel` names the op (1 + its name's index in the trace; 0 for the replayer's own sweep):
  // ops of different names launch different functions, as a framework's kernels are, so the
  // engine's step tokens (which hash the function) tell them apart.
  virtual absl::Status Launch(absl::Span<const spillway_replay::ReplaySlot> slots,
                              uint64_t sequence, uint64_t time_ns, int lane, uint32_t kernel) = 0;
  // The end of the `index`-th stretch of the run (0-based): the trace's context synchronize.
  virtual absl::Status EndStretch(int index) = 0;
  // Test-only: once the work launched so far is done, inverts the byte at `address`.
  virtual absl::Status FlipByte(uint64_t address) = 0;
};

// Hands out addresses and does nothing else.
class NullReplayDevice : public ReplayDevice {
 public:
  absl::StatusOr<uint64_t> Allocate(uint64_t bytes) override {
    const uint64_t address = next_;
    next_ += (bytes + 4095) / 4096 * 4096;
    return address;
  }
  absl::Status Free(uint64_t, uint64_t) override { return absl::OkStatus(); }
  absl::Status Launch(absl::Span<const spillway_replay::ReplaySlot>, uint64_t, uint64_t, int,
                      uint32_t) override {
    return absl::OkStatus();
  }
  absl::Status EndStretch(int) override { return absl::OkStatus(); }
  absl::Status FlipByte(uint64_t) override { return absl::OkStatus(); }

 private:
  uint64_t next_ = uint64_t{1} << 40;
};

}  // namespace spillway::replay

#endif  // SPILLWAY_WORKLOADS_REPLAY_REPLAY_DEVICE_H_
