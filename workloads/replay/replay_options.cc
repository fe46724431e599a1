// ParseReplayOptions (replay_options.h), read with common/command_line.h, and the usage text.
#include "workloads/replay/replay_options.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/size.h"

namespace spillway::replay {

const char kReplayUsage[] =
    "usage: spillway-replay TRACE [--steps N] [--warmup K] [--alloc async|arena|managed]\n"
    "                       [--touch page|all|SIZE] [--json]\n"
    "Replays a recorded training step (a spillway trace, docs/workloads.md) through the CUDA\n"
    "driver API: one kernel per op touching what the op touched and lasting the op's recorded\n"
    "time. On simgpu when build/out/simgpu is on LD_LIBRARY_PATH; under spillway with\n"
    "`spillway run -- spillway-replay ...`.\n"
    "  --steps N      training steps to run: the trace's steps in order, then its last step\n"
    "                 again until N have run (default: the trace's own count)\n"
    "  --warmup K     steps left out of the mean step time (default 2, at most N - 1)\n"
    "  --alloc MODE   async: cuMemAllocAsync/cuMemFreeAsync per tensor (default); arena:\n"
    "                 tensors carved from cuMemAlloc segments as PyTorch's caching allocator\n"
    "                 does; managed: cuMemAllocManaged/cuMemFree per tensor\n"
    "  --touch WHAT   page: each access reads or writes the 8 bytes at every 4 KiB of its\n"
    "                 tensor in its range, and its ends (default); all: every byte; SIZE (a\n"
    "                 power of two from 16 B to 1 GiB, e.g. 64KiB): as page, every SIZE\n"
    "  --json         one JSON line of results instead of the text\n"
    "exit: 0 done, 1 error, 2 out of device memory\n";

namespace {

absl::Status ParseTouch(const std::string& value, int* touch) {
  if (value == "all") {
    *touch = spillway_replay::kTouchAll;
    return absl::OkStatus();
  }
  if (value == "page") {
    *touch = spillway_replay::kTouchPage;
    return absl::OkStatus();
  }
  const absl::StatusOr<uint64_t> size = ParseSize(value);
  for (int k = spillway_replay::kMinStrideLog2; size.ok() && k <= spillway_replay::kMaxStrideLog2;
       ++k) {
    if (*size == uint64_t{1} << k) {
      *touch = k;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--touch: '", value, "' is not page, all or a power of two from 16 B to 1 GiB"));
}

}  // namespace

std::string TouchName(int touch) {
  if (touch == spillway_replay::kTouchAll) return "all";
  if (touch == spillway_replay::kTouchPage) return "page";
  return absl::StrCat(uint64_t{1} << touch);
}

absl::StatusOr<ReplayOptions> ParseReplayOptions(int argc, const char* const* argv) {
  ReplayOptions options;
  std::string steps, warmup, alloc, touch, flip;
  CommandLine cl({.name = "spillway-replay",
                  .usage = kReplayUsage,
                  .unknown_option = "unknown option '{}'",
                  .extra_argument = "a second trace '{}'"});
  cl.Positional("trace", &options.trace, /*required=*/true);
  cl.Flag("--json", &options.json);
  cl.Option("--steps", &steps);
  cl.Option("--warmup", &warmup);
  cl.Option("--alloc", &alloc);
  cl.Option("--touch", &touch);
  cl.Option("--flip-after-launch", &flip);  // test-only
  const ParsedArguments parsed = cl.Parse(argc, argv);
  if (parsed.help) {
    options.help = true;
    return options;
  }
  if (!parsed.error.empty()) return absl::InvalidArgumentError(parsed.error);
  const auto count = [](const std::string& flag, const std::string& value, int min,
                        int* out) -> absl::Status {
    if (!absl::SimpleAtoi(value, out) || *out < min || *out > 1000000) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": '", value, "' is not an integer from ", min, " to 1000000"));
    }
    return absl::OkStatus();
  };
  if (cl.Given("--steps")) {
    if (absl::Status s = count("--steps", steps, 1, &options.steps); !s.ok()) return s;
  }
  if (cl.Given("--warmup")) {
    if (absl::Status s = count("--warmup", warmup, 0, &options.warmup); !s.ok()) return s;
  }
  if (cl.Given("--alloc")) {
    if (alloc == "async") {
      options.alloc = AllocMode::kAsync;
    } else if (alloc == "arena") {
      options.alloc = AllocMode::kArena;
    } else if (alloc == "managed") {
      options.alloc = AllocMode::kManaged;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--alloc: '", alloc, "' is not async, arena or managed"));
    }
  }
  if (cl.Given("--touch")) {
    if (absl::Status s = ParseTouch(touch, &options.touch); !s.ok()) return s;
  }
  // test-only: shows the verification can fail
  if (cl.Given("--flip-after-launch") &&
      (!absl::SimpleAtoi(flip, &options.flip_after_launch) || options.flip_after_launch == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--flip-after-launch: '", flip, "' is not a launch number from 1"));
  }
  return options;
}

}  // namespace spillway::replay
