// spillway-report: turns a trace into one self-contained HTML report (docs/report.md).
//   spillway-report TRACE -o report.html [--no-symbolize]
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "common/command_line.h"
#include "common/output_file.h"
#include "profiler/report/planner_step.h"
#include "profiler/report/progress_line.h"
#include "profiler/report/report_html.h"
#include "profiler/report/report_svg.h"
#include "profiler/report/symbolizer.h"
#include "profiler/report/trace_analysis.h"
#include "profiler/report/trace_model_loader.h"

namespace {

constexpr const char* kUsage = "usage: spillway-report TRACE -o REPORT.html [--no-symbolize]\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "spillway-report: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  namespace report = spillway::report;
  std::string trace, out;
  bool no_symbolize = false;
  spillway::CommandLine cl({"spillway-report", kUsage});
  cl.Positional("TRACE", &trace, /*required=*/true);
  cl.Option("-o,--output", &out, /*required=*/true);
  cl.Flag("--no-symbolize", &no_symbolize);
  if (const std::optional<int> done = cl.ParseForMain(argc, argv)) return *done;
  const bool symbolize = !no_symbolize;
  if (absl::Status s = spillway::CheckOutputIsNotInput(out, trace, "the trace"); !s.ok()) {
    std::fprintf(stderr, "spillway-report: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  report::ProgressLine progress("spillway-report");
  absl::StatusOr<report::TraceModel> model = report::LoadTraceModel(
      trace,
      [&](uint64_t done, uint64_t total) { progress.Update("reading " + trace, done, total); });
  if (!model.ok()) return Fail(std::string(model.status().message()));
  if (symbolize) {
    progress.Update("symbolizing", 0, 0);
    report::Symbolize(*model);
  }
  progress.Update("analyzing", 0, 0);
  report::Analysis analysis = report::Analyze(*model);
  report::UsePlannersStep(trace, *model, &analysis);
  progress.Update("writing " + out, 0, 0);
  const std::string html = report::RenderHtmlReport(*model, analysis);
  if (absl::Status s = spillway::WriteFileAtomically(out, html); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  progress.Done();
  std::printf("spillway-report: wrote %s (%s): peak %s, %zu launches, step %s\n", out.c_str(),
              report::FormatBytes(html.size()).c_str(),
              report::FormatBytes(analysis.peak.bytes).c_str(), model->launches.size(),
              analysis.step.found
                  ? (std::to_string(analysis.step.launches_per_step) + " launches every " +
                     report::FormatDuration(analysis.step.median_step_ns))
                        .c_str()
                  : "not found");
  return 0;
}
