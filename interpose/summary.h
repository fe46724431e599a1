// The exit summary (SPILLWAY_SUMMARY): what the shim saw during the process, as one JSON object.
// The format is documented in docs/summary-format.md; tests and benchmarks read it.
#ifndef SPILLWAY_INTERPOSE_SUMMARY_H_
#define SPILLWAY_INTERPOSE_SUMMARY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/front_door.h"

namespace spillway::interpose {

struct SummaryData {
  std::string version;
  std::string mode;
  long pid = 0;
  std::string driver;  // path of the driver the hooks forward to; empty when never resolved
  // Hooked functions called at least once, in hook-list order.
  std::vector<std::pair<std::string_view, uint64_t>> calls;
  uint64_t launches = 0;
  uint64_t graph_launches = 0;
  uint64_t allocation_count = 0;
  uint64_t bytes_peak = 0;
  uint64_t managed_bytes_peak = 0;
  uint64_t vmm_count = 0;
  // Allocations kept as plain device memory, by reason, and IPC handles refused for managed memory.
  uint64_t device_exceptions_capture = 0;
  uint64_t device_exceptions_module = 0;
  uint64_t ipc_refused = 0;
  // The residency engine; "passthrough" and zeros when none ran.
  std::string engine_policy = "passthrough";
  uint64_t prefetch_bytes = 0;
  uint64_t evict_bytes = 0;
  uint64_t discard_bytes = 0;
  uint64_t overwrite_discard_bytes = 0;
  uint64_t predicted_launches = 0;  // launches the learned policy predicted correctly, summed
  uint64_t step_length = 0;         // the detected step in launches (largest over devices); 0: none
  uint64_t thread_steps = 0;  // threads whose own step the policy follows (largest over devices)
  uint64_t reordered_launches = 0;  // launches repeated at another place in their step, summed
  uint64_t lookahead_prefetch_bytes = 0;  // of prefetch_bytes, those prefetched ahead of a launch
  uint64_t budget_bytes = 0;              // summed over devices
  uint64_t engine_devices = 0;            // devices with an engine
  uint64_t ballast_bytes = 0;             // SPILLWAY_BALLAST, summed over devices
  uint64_t launches_resolved = 0;
  // The shim's own driver calls (moves, discards, kernel timing) skipped because a stream capture
  // in progress would have been invalidated by them.
  uint64_t capture_skips = 0;
  // SPILLWAY_POLICY: how closely each engine followed the policy file; empty without one.
  std::vector<policy::ScheduleAdherence> policy_file;
  std::vector<std::string> errors;
};

// Each message the summary holds (errors, a policy file's path and fallback reason) is cut to at
// most this many bytes, with how many were left out: a policy file's key of megabytes once made the
// summary that long, and the launcher's reader took minutes over it.
inline constexpr size_t kMaxSummaryMessageBytes = 1024;
std::string BoundedMessage(const std::string& text);

std::string FormatSummary(const SummaryData& data);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_SUMMARY_H_
