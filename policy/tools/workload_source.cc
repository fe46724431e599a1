// Shared argument parsing (common/command_line.h) and workload loading of spillway-plan and
// spillway-simulate.
#include "policy/tools/workload_source.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/calibration.h"
#include "common/command_line.h"
#include "common/size.h"
#include "policy/planner/synthetic_workloads.h"
#include "policy/planner/trace_workload.h"

namespace spillway::policy {
namespace {

// A positive number for `flag`, from `min` to `max` (`range` says so for people): no infinity, no
// NaN, nothing that makes a predicted time overflow or vanish.
absl::StatusOr<double> PositiveNumber(const std::string& flag, const std::string& text, double min,
                                      double max, const char* range) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || !(v > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", text, "' is not a positive number"));
  }
  if (v < min || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", text, "' is out of range (", range, ")"));
  }
  return v;
}

}  // namespace

absl::StatusOr<ToolArgs> ParseToolArgs(int argc, char** argv,
                                       const std::vector<std::string>& extra) {
  ToolArgs a;
  std::string oversubscription, h2d, d2h, fault_batch, copy_engines;
  // The tools print their usage and errors themselves.
  CommandLine cl({.name = "",
                  .usage = "",
                  .unknown_option = "unknown flag {}",
                  .extra_argument = "more than one TRACE given"});
  const auto allowed = [&](const std::string& f) {
    return std::find(extra.begin(), extra.end(), f) != extra.end();
  };
  cl.Positional("TRACE", &a.trace);
  cl.Option("--synthetic", &a.synthetic);
  cl.Option("--device-memory", &a.device_memory_text);
  cl.Option("--oversubscription", &oversubscription);
  cl.Option("--h2d-gbps", &h2d);
  cl.Option("--d2h-gbps", &d2h);
  cl.Option("--fault-batch-us", &fault_batch);
  cl.Option("--copy-engines", &copy_engines);
  cl.Option("--calibration", &a.calibration);
  if (allowed("-o")) cl.Option("-o", &a.output);
  if (allowed("--policy")) cl.Option("--policy", &a.policy);
  if (allowed("--benchmark")) cl.Flag("--benchmark", &a.benchmark);
  if (allowed("--fewest-bytes")) cl.Flag("--fewest-bytes", &a.fewest_bytes);
  const ParsedArguments parsed = cl.Parse(argc, argv);
  if (parsed.help) {
    a.help = true;
    return a;
  }
  if (!parsed.error.empty()) return absl::InvalidArgumentError(parsed.error);
  if (cl.Given("--device-memory") && a.device_memory_text.empty()) {
    return absl::InvalidArgumentError("--device-memory needs a size (e.g. 8GiB), not ''");
  }
  if (cl.Given("--oversubscription")) {
    absl::StatusOr<double> v = PositiveNumber("--oversubscription", oversubscription,
                                              kMinOversubscription, 1e6, "0.000001 to 1000000");
    if (!v.ok()) return v.status();
    a.oversubscription = *v;
  }
  // Link bandwidth from 1 MB/s to 1 PB/s; a fault batch from 1 ns to 1 s.
  for (auto [flag, text, out, unit] :
       {std::tuple{"--h2d-gbps", &h2d, &a.h2d_bytes_per_s, 1e9},
        std::tuple{"--d2h-gbps", &d2h, &a.d2h_bytes_per_s, 1e9},
        std::tuple{"--fault-batch-us", &fault_batch, &a.fault_batch_seconds, 1e-6}}) {
    if (!cl.Given(flag)) continue;
    absl::StatusOr<double> v = PositiveNumber(flag, *text, 1e-3, 1e6, "0.001 to 1000000");
    if (!v.ok()) return v.status();
    *out = *v * unit;
  }
  if (cl.Given("--copy-engines")) {
    if (copy_engines != "1" && copy_engines != "2") {
      return absl::InvalidArgumentError(
          absl::StrCat("--copy-engines '", copy_engines, "' must be 1 or 2"));
    }
    a.copy_engines = copy_engines == "1" ? 1 : 2;
  }
  if (!a.benchmark && a.trace.empty() == a.synthetic.empty()) {
    return absl::InvalidArgumentError("give exactly one of TRACE or --synthetic NAME");
  }
  if (!a.benchmark && a.device_memory_text.empty() == (a.oversubscription == 0)) {
    return absl::InvalidArgumentError(
        "give exactly one of --device-memory SIZE or --oversubscription X");
  }
  return a;
}

absl::StatusOr<CostModel> CostModelFor(const ToolArgs& args, std::string* warning) {
  if (warning != nullptr) warning->clear();
  CostModel cost;
  if (!args.calibration.empty()) {
    absl::StatusOr<Calibration> cal = ReadCalibration(args.calibration);
    if (!cal.ok()) return cal.status();
    cost = cal->cost;
    if (warning != nullptr) *warning = GranuleWarning(*cal);
  }
  if (args.h2d_bytes_per_s) cost.h2d_bytes_per_s = *args.h2d_bytes_per_s;
  if (args.d2h_bytes_per_s) cost.d2h_bytes_per_s = *args.d2h_bytes_per_s;
  if (args.fault_batch_seconds) cost.fault_batch_seconds = *args.fault_batch_seconds;
  if (args.copy_engines) cost.copy_engines = *args.copy_engines;
  return cost;
}

absl::StatusOr<Workload> LoadWorkload(const ToolArgs& args, std::string* warning) {
  if (warning != nullptr) warning->clear();
  if (!args.synthetic.empty()) return MakeSyntheticWorkload(args.synthetic);
  return WorkloadFromTrace(args.trace, warning);
}

absl::StatusOr<uint64_t> DeviceMemoryFor(const ToolArgs& args, const Workload& w) {
  if (args.oversubscription > 0) {
    // Finite and at least kMinOversubscription (ParseToolArgs): at most a million times the peak.
    const double bytes = static_cast<double>(w.peak_live_bytes()) / args.oversubscription;
    if (bytes < static_cast<double>(kChunkBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--oversubscription ", args.oversubscription, " leaves less than one 2 MiB chunk of the ",
          w.peak_live_bytes(), " bytes the step has live at its peak"));
    }
    return static_cast<uint64_t>(bytes);
  }
  absl::StatusOr<uint64_t> size = ParseSize(args.device_memory_text);
  if (!size.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device-memory '", args.device_memory_text, "': ", size.status().message()));
  }
  if (*size < kChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--device-memory '", args.device_memory_text,
                                                   "' is less than one 2 MiB chunk"));
  }
  return *size;
}

std::string LargerThanDeviceWarning(const Workload& w, uint64_t capacity_bytes) {
  const Workload::LargestLaunch largest = w.largest_launch();
  if (largest.bytes <= capacity_bytes) return "";
  return absl::StrCat(
      "launch ", largest.position, " of the step (", largest.kernel.empty() ? "?" : largest.kernel,
      ") touches ", FormatSize(largest.bytes), ", more than the device's ",
      FormatSize(capacity_bytes),
      ": no schedule holds it there; a plan brings in what fits, the device pages in the rest "
      "while the kernel runs, and what is over the budget is sent out right after it");
}

}  // namespace spillway::policy
