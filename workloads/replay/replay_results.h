// What spillway-replay prints: the step times, their mean after the warm-up, the trace's peak,
// the digest and the counts, as text lines or as one JSON line.
#ifndef SPILLWAY_WORKLOADS_REPLAY_REPLAY_RESULTS_H_
#define SPILLWAY_WORKLOADS_REPLAY_REPLAY_RESULTS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/replay/replay_kernel_abi.h"
#include "workloads/replay/replayer.h"

namespace spillway::replay {

struct ReplayResults {
  std::string trace;
  std::string device;
  uint64_t device_memory = 0;  // as cuMemGetInfo reports it (spillway's total under spillway)
  std::string alloc;
  std::string touch;  // "all", "page" or a stride in bytes (TouchName)
  int recorded_steps = 0;
  std::vector<double> step_ms;     // each training step, in order
  std::vector<int> recorded_step;  // the trace's step each one ran (1-based)
  int warmup = 0;
  uint64_t peak_live_bytes = 0;  // the trace's
  uint64_t arena_segment_bytes = 0;
  double recorded_step_ms = 0;  // the sum of the last recorded step's op times
  // What the trace holds that is not replayed as it was recorded (ReplayTrace).
  bool has_modes = true;
  uint64_t untimed_launches = 0;
  uint64_t ignored_records = 0;
  uint64_t trailing_events = 0;
  ReplayCounts counts;
  std::array<uint64_t, spillway_replay::kDigestWords> digest_words{};

  // The mean of step_ms after the warm-up.
  double MeanStepMs() const;
  // One 64-bit value of the digest words, as 16 hex digits.
  std::string Digest() const;
  // Bytes the kernels checked (the ops' reads and the final sweep).
  uint64_t VerifiedBytes() const;
};

// The text report (lines ending in '\n'), with the digest on its last line: "digest 0x...".
std::string ResultsText(const ReplayResults& results);
// One JSON line (no newline).
std::string ResultsJson(const ReplayResults& results);

}  // namespace spillway::replay

#endif  // SPILLWAY_WORKLOADS_REPLAY_REPLAY_RESULTS_H_
