// What spillway-plan and spillway-simulate share: the command line's workload (a trace or
// --synthetic NAME), the device budget (--device-memory SIZE or --oversubscription X) and the
// cost-model flags (--calibration FILE, then --h2d-gbps and the others over it), parsed with one
// clear line per bad argument.
#ifndef SPILLWAY_POLICY_TOOLS_WORKLOAD_SOURCE_H_
#define SPILLWAY_POLICY_TOOLS_WORKLOAD_SOURCE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/plan/workload_model.h"
#include "policy/planner/simulator.h"

namespace spillway::policy {

// The least --oversubscription taken: a budget of at most a million times the step's peak.
inline constexpr double kMinOversubscription = 1e-6;

struct ToolArgs {
  std::string trace;      // positional TRACE
  std::string synthetic;  // --synthetic NAME
  std::string device_memory_text;
  double oversubscription = 0;  // --oversubscription X: budget = peak live bytes / X
  std::string output;           // -o FILE
  std::string policy;           // --policy FILE
  bool benchmark = false;       // --benchmark
  bool fewest_bytes = false;    // --fewest-bytes: Belady's victims only (spillway-plan)
  bool help = false;            // -h / --help: print the usage, nothing else
  std::string calibration;      // --calibration FILE (common/calibration.h)
  // The cost-model flags, over the calibration's figures (CostModelFor).
  std::optional<double> h2d_bytes_per_s, d2h_bytes_per_s, fault_batch_seconds;
  std::optional<int> copy_engines;
};

// Parses argv; `extra` lists the flags beyond the shared ones this tool accepts.
absl::StatusOr<ToolArgs> ParseToolArgs(int argc, char** argv,
                                       const std::vector<std::string>& extra);

// The cost model: the --calibration file's figures (the defaults without one), then the cost-model
// flags'. `warning`, when given, gets GranuleWarning's line, or "".
absl::StatusOr<CostModel> CostModelFor(const ToolArgs& args, std::string* warning = nullptr);

// The trace's or the synthetic workload. `warning`, when given, gets one line about the trace
// (records the recorder dropped), or "".
absl::StatusOr<Workload> LoadWorkload(const ToolArgs& args, std::string* warning = nullptr);

// The budget in bytes for `w` (from --device-memory or --oversubscription).
absl::StatusOr<uint64_t> DeviceMemoryFor(const ToolArgs& args, const Workload& w);

// One line when a launch of `w` touches more than `capacity_bytes` (an op larger than the device:
// what does not fit is paged in while its kernel runs), else "".
std::string LargerThanDeviceWarning(const Workload& w, uint64_t capacity_bytes);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_TOOLS_WORKLOAD_SOURCE_H_
