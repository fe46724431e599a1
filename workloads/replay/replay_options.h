// spillway-replay's command line: the trace, how many steps, how tensors are allocated, how much
// of them each kernel touches, and how the results are printed.
#ifndef SPILLWAY_WORKLOADS_REPLAY_REPLAY_OPTIONS_H_
#define SPILLWAY_WORKLOADS_REPLAY_REPLAY_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "workloads/replay/driver_replay_device.h"
#include "workloads/replay/replay_kernel_abi.h"

namespace spillway::replay {

struct ReplayOptions {
  std::string trace;
  int steps = 0;    // 0: the trace's training steps
  int warmup = -1;  // -1: 2, or fewer where the run has fewer steps after them
  AllocMode alloc = AllocMode::kAsync;
  int touch = spillway_replay::kTouchPage;  // kTouchAll or a stride's log2
  bool json = false;
  bool help = false;
  uint64_t flip_after_launch = 0;  // test-only (--flip-after-launch)
};

// "all", "page" or the stride in bytes ("65536"), as --touch takes it.
std::string TouchName(int touch);

// Parses argv (argv[0] is the program). Errors are one line naming the option.
absl::StatusOr<ReplayOptions> ParseReplayOptions(int argc, const char* const* argv);

extern const char kReplayUsage[];

}  // namespace spillway::replay

#endif  // SPILLWAY_WORKLOADS_REPLAY_REPLAY_OPTIONS_H_
