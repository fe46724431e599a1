// The progress line of `spillway profile`: every 2 s the time since the job started and the bytes
// its traces hold so far, on stderr (on a terminal one line redrawn in place, else a line each
// time).
#ifndef SPILLWAY_LAUNCHER_PROGRESS_H_
#define SPILLWAY_LAUNCHER_PROGRESS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace spillway::launcher {

// 72 -> "1m12s", 3700 -> "1h01m", 5 -> "5s".
std::string HumanDuration(int64_t seconds);

// Decimal units: 845123456 -> "845 MB", 1500000000 -> "1.5 GB", 999 -> "999 B".
std::string HumanBytes(uint64_t bytes);

// The traces the job's processes listed in LIST (SPILLWAY_TRACE_LIST, one path a line) that are
// still there. Another job's traces on the same path are in its own list, not in this one.
std::vector<std::string> FindTraces(const std::string& list);

// Prints the line for ELAPSED_SECONDS and the traces in LIST.
void PrintProgress(const std::string& list, int64_t elapsed_seconds);

// Clears the line on a terminal (after the job, before the summary lines).
void ClearProgress();

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_PROGRESS_H_
