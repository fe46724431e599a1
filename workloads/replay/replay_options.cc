// ParseReplayOptions (replay_options.h) and the usage text.
#include "workloads/replay/replay_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      return options;
    }
    if (arg == "--json") {
      options.json = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!options.trace.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("a second trace '", arg, "'"));
      }
      options.trace = arg;
      continue;
    }
    if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
    const std::string value = argv[++i];
    const auto count = [&](int min, int* out) -> absl::Status {
      if (!absl::SimpleAtoi(value, out) || *out < min || *out > 1000000) {
        return absl::InvalidArgumentError(
            absl::StrCat(arg, ": '", value, "' is not an integer from ", min, " to 1000000"));
      }
      return absl::OkStatus();
    };
    absl::Status status;
    if (arg == "--steps") {
      status = count(1, &options.steps);
    } else if (arg == "--warmup") {
      status = count(0, &options.warmup);
    } else if (arg == "--alloc") {
      if (value == "async") {
        options.alloc = AllocMode::kAsync;
      } else if (value == "arena") {
        options.alloc = AllocMode::kArena;
      } else if (value == "managed") {
        options.alloc = AllocMode::kManaged;
      } else {
        status = absl::InvalidArgumentError(
            absl::StrCat("--alloc: '", value, "' is not async, arena or managed"));
      }
    } else if (arg == "--touch") {
      status = ParseTouch(value, &options.touch);
    } else if (arg == "--flip-after-launch") {  // test-only: shows the verification can fail
      if (!absl::SimpleAtoi(value, &options.flip_after_launch) || options.flip_after_launch == 0) {
        status = absl::InvalidArgumentError(
            absl::StrCat(arg, ": '", value, "' is not a launch number from 1"));
      }
    } else {
      status = absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'"));
    }
    if (!status.ok()) return status;
  }
  if (options.trace.empty()) return absl::InvalidArgumentError("no trace given");
  return options;
}

}  // namespace spillway::replay
