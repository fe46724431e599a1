// The HTML report of a trace: one self-contained file (inline CSS and SVG, no script, no network)
// with the header, memory over time stacked by allocating site with the peak marked, what is live
// at the peak, the training step, per-kernel working sets, swap candidates and UVM faults.
#ifndef SPILLWAY_PROFILER_REPORT_REPORT_HTML_H_
#define SPILLWAY_PROFILER_REPORT_REPORT_HTML_H_

#include <string>

#include "profiler/report/trace_analysis.h"
#include "profiler/report/trace_model.h"

namespace spillway::report {

std::string RenderHtmlReport(const TraceModel& model, const Analysis& analysis);

}  // namespace spillway::report

#endif  // SPILLWAY_PROFILER_REPORT_REPORT_HTML_H_
