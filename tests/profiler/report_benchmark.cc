// How long the report and the Perfetto export take on long synthetic training traces: prints one
// row per trace size with the analysis, HTML and export times and the output sizes.
//   report_benchmark [STEPS...]   (default: 400 4000 40000 steps of 25 launches)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "profiler/report/perfetto_export.h"
#include "profiler/report/report_html.h"
#include "profiler/report/trace_analysis.h"
#include "tests/profiler/report_synthetic_trace.h"

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  namespace report = spillway::report;
  std::vector<int> steps;
  for (int i = 1; i < argc; ++i) steps.push_back(std::atoi(argv[i]));
  if (steps.empty()) steps = {400, 4000, 40000};
  std::printf("%10s %12s %12s %10s %10s %12s %14s\n", "launches", "allocations", "analyze ms",
              "html ms", "html KiB", "export ms", "json.gz KiB");
  for (const int n : steps) {
    report::testing::SyntheticShape shape;
    shape.layers = 12;
    shape.steps = n;
    const report::TraceModel model = report::testing::SyntheticTrace(shape);
    auto t = std::chrono::steady_clock::now();
    const report::Analysis analysis = report::Analyze(model);
    const double analyze_ms = MsSince(t);
    t = std::chrono::steady_clock::now();
    const std::string html = report::RenderHtmlReport(model, analysis);
    const double html_ms = MsSince(t);
    t = std::chrono::steady_clock::now();
    report::GzipStream gzip;
    report::WriteChromeTrace(model, [&gzip](std::string_view piece) { gzip.Append(piece); });
    const absl::StatusOr<std::string> gz = gzip.Finish();
    const double export_ms = MsSince(t);
    if (!gz.ok()) {
      std::fprintf(stderr, "report_benchmark: %s\n", std::string(gz.status().message()).c_str());
      return 1;
    }
    std::printf("%10zu %12zu %12.0f %10.1f %10zu %12.0f %14zu\n", model.launches.size(),
                model.allocations.size(), analyze_ms, html_ms, html.size() / 1024, export_ms,
                gz->size() / 1024);
  }
  return 0;
}
