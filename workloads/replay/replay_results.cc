// ReplayResults' text and JSON forms (replay_results.h).
#include "workloads/replay/replay_results.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/size.h"
#include "nlohmann/json.hpp"

namespace spillway::replay {

using spillway_replay::DigestBytesWord;
using spillway_replay::DigestSumWord;
using spillway_replay::kLaneFinal;
using spillway_replay::kLaneOps;
using spillway_replay::Mix64;

double ReplayResults::MeanStepMs() const {
  double total = 0;
  int count = 0;
  for (size_t i = static_cast<size_t>(warmup); i < step_ms.size(); ++i) {
    total += step_ms[i];
    ++count;
  }
  return count == 0 ? 0 : total / count;
}

std::string ReplayResults::Digest() const {
  uint64_t digest = 0;
  for (const uint64_t word : digest_words) digest = Mix64(digest ^ word) + 0x9E3779B97F4A7C15ull;
  return absl::StrFormat("0x%016x", digest);
}

uint64_t ReplayResults::VerifiedBytes() const {
  return digest_words[DigestBytesWord(kLaneOps)] + digest_words[DigestBytesWord(kLaneFinal)];
}

std::string ResultsText(const ReplayResults& r) {
  std::string out =
      absl::StrCat("trace: ", r.trace, ": ", r.recorded_steps, " recorded steps, peak ",
                   FormatSize(r.peak_live_bytes), " live, last step's ops ",
                   absl::StrFormat("%.3f", r.recorded_step_ms), " ms\n");
  absl::StrAppend(&out, "device: ", r.device, ", ", FormatSize(r.device_memory), "; alloc ",
                  r.alloc, "; touch ", r.touch);
  if (r.arena_segment_bytes > 0) {
    absl::StrAppend(&out, "; arena segments ", FormatSize(r.arena_segment_bytes));
  }
  absl::StrAppend(&out, "\n");
  if (!r.has_modes) {
    absl::StrAppend(&out,
                    "note: the trace has no access modes: every access is read and written\n");
  }
  if (r.untimed_launches > 0) {
    absl::StrAppend(&out, "note: ", r.untimed_launches,
                    " launches have no kernel-time record and run for 0 ns\n");
  }
  if (r.ignored_records > 0) {
    absl::StrAppend(&out, "note: ", r.ignored_records,
                    " memcpy, memset, graph launch and non-context synchronize records are not "
                    "replayed\n");
  }
  if (r.trailing_events > 0) {
    absl::StrAppend(&out, "note: ", r.trailing_events,
                    " allocations, frees and launches after the last context synchronize are not "
                    "replayed\n");
  }
  for (size_t i = 0; i < r.step_ms.size(); ++i) {
    absl::StrAppend(&out, absl::StrFormat("step %d: %.6f ms", i + 1, r.step_ms[i]));
    if (r.recorded_step[i] != static_cast<int>(i) + 1) {
      absl::StrAppend(&out, " (recorded step ", r.recorded_step[i], " again)");
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("mean step time: %.6f ms (steps %d to %d)\n",
                                        r.MeanStepMs(), r.warmup + 1, r.step_ms.size()));
  absl::StrAppend(&out, "launches: ", r.counts.launches, " (", r.counts.split_ops,
                  " ops split); bytes read before written, written instead: ",
                  r.counts.first_touch_bytes, "; verified ", FormatSize(r.VerifiedBytes()), "\n");
  if (!r.counts.flipped.empty()) absl::StrAppend(&out, "test: ", r.counts.flipped, "\n");
  absl::StrAppend(&out, "digest ", r.Digest(), "\n");
  return out;
}

std::string ResultsJson(const ReplayResults& r) {
  // Keys in this order, on one line; a name that is not UTF-8 is written with U+FFFD, not refused.
  const nlohmann::ordered_json json = {
      {"trace", r.trace},
      {"device", r.device},
      {"device_memory_bytes", r.device_memory},
      {"alloc", r.alloc},
      {"touch", r.touch},
      {"recorded_steps", r.recorded_steps},
      {"steps", r.step_ms.size()},
      {"warmup", r.warmup},
      {"mean_step_ms", r.MeanStepMs()},
      {"step_ms", r.step_ms},
      {"recorded_step_ms", r.recorded_step_ms},
      {"peak_live_bytes", r.peak_live_bytes},
      {"has_modes", r.has_modes},
      {"untimed_launches", r.untimed_launches},
      {"ignored_records", r.ignored_records},
      {"trailing_events", r.trailing_events},
      {"arena_segment_bytes", r.arena_segment_bytes},
      {"launches", r.counts.launches},
      {"split_ops", r.counts.split_ops},
      {"first_touch_bytes", r.counts.first_touch_bytes},
      {"verified_bytes", r.VerifiedBytes()},
      {"digest", r.Digest()},
  };
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace spillway::replay
