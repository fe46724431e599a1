// spillway-replay: runs a recorded training step (a spillway trace) through the CUDA driver API,
// on simgpu or a GPU, with or without spillway (docs/workloads.md, "The replayer"). The trace is
// read and the whole run checked without a device first, so a trace that cannot be replayed is
// one line before any work.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "workloads/replay/driver_replay_device.h"
#include "workloads/replay/replay_options.h"
#include "workloads/replay/replay_results.h"
#include "workloads/replay/replay_trace.h"
#include "workloads/replay/replayer.h"

namespace spillway::replay {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitOutOfMemory = 2;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "spillway-replay: %s\n", std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kResourceExhausted ? kExitOutOfMemory : kExitError;
}

int Main(int argc, char** argv) {
  absl::StatusOr<ReplayOptions> options = ParseReplayOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "spillway-replay: %s (see spillway-replay --help)\n",
                 std::string(options.status().message()).c_str());
    return kExitError;
  }
  if (options->help) {
    std::fputs(kReplayUsage, stdout);
    return kExitOk;
  }
  absl::StatusOr<ReplayTrace> trace = ReadReplayTrace(options->trace);
  if (!trace.ok()) return Fail(trace.status());
  ReplayPlanOptions plan;
  plan.steps = options->steps > 0 ? options->steps : trace->recorded_steps();
  plan.touch = options->touch;
  plan.flip_after_launch = options->flip_after_launch;
  const int warmup = options->warmup >= 0 ? options->warmup : std::min(2, plan.steps - 1);
  if (warmup >= plan.steps) {
    return Fail(
        absl::InvalidArgumentError("--warmup must leave at least one of the --steps to time"));
  }
  {
    Replayer dry(*trace, plan);
    NullReplayDevice null;
    if (absl::Status s = dry.Run(&null); !s.ok()) return Fail(s);
  }
  Replayer replayer(*trace, plan);
  absl::StatusOr<std::unique_ptr<DriverReplayDevice>> device = DriverReplayDevice::Open(
      options->alloc, options->touch, static_cast<int>(replayer.stretches().size()));
  if (!device.ok()) return Fail(device.status());
  if (absl::Status s = replayer.Run(device->get()); !s.ok()) return Fail(s);

  ReplayResults results;
  absl::StatusOr<std::vector<double>> stretch_ms = (*device)->StretchMilliseconds();
  if (!stretch_ms.ok()) return Fail(stretch_ms.status());
  for (size_t i = 0; i < stretch_ms->size(); ++i) {
    if (!replayer.IsStep(i)) continue;
    results.step_ms.push_back((*stretch_ms)[i]);
    results.recorded_step.push_back(static_cast<int>(replayer.stretches()[i]) +
                                    (trace->first_is_prologue ? 0 : 1));
  }
  absl::StatusOr<std::array<uint64_t, spillway_replay::kDigestWords>> digest =
      (*device)->ReadDigest();
  if (!digest.ok()) return Fail(digest.status());
  results.digest_words = *digest;
  results.trace = options->trace;
  results.device = (*device)->device_name();
  results.device_memory = (*device)->device_memory();
  results.alloc = AllocModeName(options->alloc);
  results.touch = TouchName(options->touch);
  results.recorded_steps = trace->recorded_steps();
  results.warmup = warmup;
  results.peak_live_bytes = trace->peak_live_bytes;
  results.arena_segment_bytes = (*device)->arena_segment_bytes();
  results.recorded_step_ms = static_cast<double>(trace->steps.back().time_ns) * 1e-6;
  results.has_modes = trace->has_modes;
  results.untimed_launches = trace->untimed_launches;
  results.ignored_records = trace->ignored_records;
  results.trailing_events = trace->trailing_events;
  results.counts = replayer.counts();
  if (absl::Status s = (*device)->Close(); !s.ok()) return Fail(s);

  if (options->json) {
    std::printf("%s\n", ResultsJson(results).c_str());
  } else {
    std::fputs(ResultsText(results).c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace
}  // namespace spillway::replay

int main(int argc, char** argv) { return spillway::replay::Main(argc, argv); }
