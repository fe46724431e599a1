// The lines `spillway run` prints for one process's exit summary (the JSON file libspillway.so
// writes at exit): its policy, budget, peak, traffic and errors; the first error; how far a policy
// file or the online plan was followed; how the learned policy found the job's step.
#ifndef SPILLWAY_LAUNCHER_SUMMARY_H_
#define SPILLWAY_LAUNCHER_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::launcher {

// The lines (without newlines) for the summary JSON in TEXT, or nothing when the process made no
// CUDA call through the hooks (no entry under "calls") or TEXT is not JSON. Fields it does not
// know are ignored, missing ones print as "?".
std::optional<std::vector<std::string>> SummaryLines(std::string_view text);

// A byte count as the summary lines show it: "3.00 GiB", "1.0 MiB", "2.5 KiB", "512 B".
// (Not FormatSize: the lines keep the bash launcher's fixed decimals, which users match on.)
std::string SummarySize(double bytes);

// Whether NAME (a file name) matches the exit summary's file name PATTERN, where each "%p" stands
// for any text (a pid).
bool MatchesPidPattern(const std::string& pattern, const std::string& name);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_SUMMARY_H_
