// The summary lines at the end of `spillway run`: one per exit summary the job's processes wrote,
// or one line saying why there is none.
#ifndef SPILLWAY_LAUNCHER_SUMMARY_FILES_H_
#define SPILLWAY_LAUNCHER_SUMMARY_FILES_H_

#include <ctime>
#include <optional>
#include <string>

#include "launcher/job_runner.h"

namespace spillway::launcher {

// Prints the lines of every exit summary the job wrote: the files matching PATTERN ("%p" in its
// file name = any pid) modified after WRITTEN_AFTER (when given: the user's own path, which then
// is printed too). JOB_END words the line for when there is none.
void PrintSummaries(const std::string& pattern, std::optional<time_t> written_after,
                    const JobEnd& job_end);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_SUMMARY_FILES_H_
