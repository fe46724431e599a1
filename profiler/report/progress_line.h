// A one-line progress display for the report tools: "spillway-report: reading 42%", redrawn in
// place on a terminal once an operation has run for half a second; silent when stderr is not a
// terminal, so logs and tests stay clean.
#ifndef SPILLWAY_PROFILER_REPORT_PROGRESS_LINE_H_
#define SPILLWAY_PROFILER_REPORT_PROGRESS_LINE_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace spillway::report {

class ProgressLine {
 public:
  explicit ProgressLine(std::string program);
  ~ProgressLine();

  // Shows `phase` at done/total (total 0: no percentage).
  void Update(const std::string& phase, uint64_t done, uint64_t total);
  // Clears the line (if one was drawn).
  void Done();

 private:
  std::string program_;
  bool enabled_;
  bool drawn_ = false;
  int last_percent_ = -1;
  std::string last_phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace spillway::report

#endif  // SPILLWAY_PROFILER_REPORT_PROGRESS_LINE_H_
