// spillway-export: writes a trace as a gzip'd Chrome trace-event JSON timeline for Perfetto
// (docs/report.md).
//   spillway-export TRACE --perfetto OUT.json.gz
#include <cstdio>
#include <optional>
#include <string>

#include "common/command_line.h"
#include "common/output_file.h"
#include "profiler/report/perfetto_export.h"
#include "profiler/report/progress_line.h"
#include "profiler/report/trace_model_loader.h"

namespace {

constexpr const char* kUsage = "usage: spillway-export TRACE --perfetto OUT.json.gz\n";

}  // namespace

int main(int argc, char** argv) {
  namespace report = spillway::report;
  std::string trace, out;
  spillway::CommandLine cl({"spillway-export", kUsage});
  cl.Positional("TRACE", &trace, /*required=*/true);
  cl.Option("--perfetto", &out, /*required=*/true);
  if (const std::optional<int> done = cl.ParseForMain(argc, argv)) return *done;
  if (absl::Status s = spillway::CheckOutputIsNotInput(out, trace, "the trace"); !s.ok()) {
    std::fprintf(stderr, "spillway-export: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  report::ProgressLine progress("spillway-export");
  absl::StatusOr<report::TraceModel> model = report::LoadTraceModel(
      trace,
      [&](uint64_t done, uint64_t total) { progress.Update("reading " + trace, done, total); });
  if (!model.ok()) {
    std::fprintf(stderr, "spillway-export: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  progress.Update("writing " + out, 0, 0);
  if (absl::Status s = report::WritePerfettoTrace(*model, out); !s.ok()) {
    std::fprintf(stderr, "spillway-export: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  progress.Done();
  std::printf(
      "spillway-export: wrote %s (%zu launches, %zu allocations); open it in "
      "https://ui.perfetto.dev\n",
      out.c_str(), model->launches.size(), model->allocations.size());
  return 0;
}
