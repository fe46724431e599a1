// spillway-inspect: a terminal summary of a trace (docs/report.md): versions, record counts by
// kind, dropped records, the peak and what is live at it, the training step, and the allocation
// sites ranked by bytes x idle time.
//   spillway-inspect TRACE [--top N] [--no-symbolize]
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "profiler/report/planner_step.h"
#include "profiler/report/progress_line.h"
#include "profiler/report/report_svg.h"
#include "profiler/report/symbolizer.h"
#include "profiler/report/trace_analysis.h"
#include "profiler/report/trace_model_loader.h"
#include "profiler/trace/trace_reader.h"

namespace {

namespace report = spillway::report;
namespace trace = spillway::trace;

constexpr const char* kUsage =
    "usage: spillway-inspect TRACE [--top N] [--no-symbolize]\n"
    "  Prints a summary of a trace recorded by `spillway profile`: record counts, dropped\n"
    "  records, the peak and what is live at it, the training step, and the top allocation\n"
    "  sites by bytes x idle time (the swap candidates). --top N: rows per table (default 5).\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "spillway-inspect: %s\n", message.c_str());
  return 1;
}

// A bad command line: one line, with where the usage is.
int FailUsage(const std::string& message) {
  std::fprintf(stderr, "spillway-inspect: %s (see spillway-inspect --help)\n", message.c_str());
  return 2;
}

// Records per kind, in kind order.
struct Counts {
  std::map<std::string, uint64_t> by_kind;
  uint64_t total = 0;
  uint64_t skipped = 0;
  uint16_t minor = 0;
  uint64_t bytes = 0;
};

absl::StatusOr<Counts> CountRecords(const std::string& path) {
  absl::StatusOr<std::unique_ptr<trace::TraceReader>> reader = trace::TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  Counts counts;
  trace::Record record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    ++counts.by_kind[trace::RecordKindName(trace::RecordKindOf(record))];
  }
  counts.total = (*reader)->records_read();
  counts.skipped = (*reader)->records_skipped();
  counts.minor = (*reader)->minor_version();
  counts.bytes = (*reader)->size();
  return counts;
}

void PrintHeader(const std::string& path, const report::TraceModel& model, const Counts& counts,
                 const report::Analysis& a) {
  const report::TraceHeader& h = model.header;
  std::printf("%s: spillway trace %u.%u, %s\n", path.c_str(), trace::kFormatMajor, counts.minor,
              report::FormatBytes(counts.bytes).c_str());
  std::printf("  job       %s\n", h.job.empty() ? "(unknown)" : h.job.c_str());
  std::printf("  device    %s%s, CUDA %s, driver %s, spillway %s\n",
              h.device.empty() ? "(unknown)" : h.device.c_str(),
              h.device_memory_bytes == 0
                  ? ""
                  : (" (" + report::FormatBytes(h.device_memory_bytes) + ")").c_str(),
              h.cuda_version.empty() ? "?" : h.cuda_version.c_str(),
              h.driver_version.empty() ? "?" : h.driver_version.c_str(),
              h.spillway_version.empty() ? "?" : h.spillway_version.c_str());
  std::printf("  duration  %s\n", report::FormatDuration(a.end_ns - a.start_ns).c_str());
  std::string kinds;
  for (const auto& [kind, n] : counts.by_kind) {
    absl::StrAppend(&kinds, kinds.empty() ? "" : ", ", kind, " ", n);
  }
  std::printf(
      "  records   %llu (%s)%s\n", static_cast<unsigned long long>(counts.total), kinds.c_str(),
      counts.skipped == 0 ? ""
                          : absl::StrCat(", ", counts.skipped, " of newer kinds skipped").c_str());
  std::printf(
      "  dropped   %llu%s\n", static_cast<unsigned long long>(h.dropped_records),
      h.dropped_records == 0 ? "" : "  (the recorder could not keep up: totals are lower bounds)");
}

void PrintPeak(const report::TraceModel& model, const report::Analysis& a, size_t top) {
  std::printf("peak: %s at %s, %s live\n", report::FormatBytes(a.peak.bytes).c_str(),
              report::FormatDuration(a.peak.time_ns - a.start_ns).c_str(),
              report::Plural(a.peak.live.size(), "allocation").c_str());
  for (size_t i = 0; i < a.peak.live.size() && i < top; ++i) {
    const report::Allocation& al = model.allocations[a.peak.live[i]];
    std::printf("  %10s  %-7s  allocated at %-10s  %s\n", report::FormatBytes(al.bytes).c_str(),
                report::AllocKindName(al.kind),
                report::FormatDuration(al.alloc_ns - a.start_ns).c_str(),
                report::SiteLabel(model, al.site).c_str());
  }
}

void PrintStep(const report::Analysis& a) {
  if (!a.step.found && !a.thread_steps.empty()) {
    // Threads launching at once interleave differently every step: each thread's own.
    std::printf("step: none found in the launches as a whole; they come from %zu threads:\n",
                a.thread_steps.size());
    for (const report::ThreadStep& t : a.thread_steps) {
      std::printf("  %s\n", report::ThreadStepLabel(t).c_str());
    }
    return;
  }
  if (!a.step.found) {
    std::printf("step: none found (no repeating launch sequence)\n");
    return;
  }
  std::printf("step: %s every %s, %s found, %.0f%% of launches inside them, warm-up %s\n",
              report::Plural(a.step.launches_per_step, "launch").c_str(),
              report::FormatDuration(a.step.median_step_ns).c_str(),
              report::Plural(a.step.steps, "step").c_str(), 100.0 * a.step.in_steps_fraction,
              report::FormatDuration(a.step.warmup_ns).c_str());
  if (a.step.moved_fraction > 0) {
    std::printf(
        "  its launch order changes from step to step: %.0f%% of launches come at another "
        "place than one step before (spillway run follows that; spillway plan cannot)\n",
        100.0 * a.step.moved_fraction);
  }
}

void PrintSwapCandidates(const report::TraceModel& model, const report::Analysis& a, size_t top) {
  if (a.swap_candidates.empty()) {
    std::printf("swap candidates: none (nothing sits idle long enough to be worth moving)\n");
    return;
  }
  std::printf(
      "swap candidates (allocation sites by bytes x idle time; [id] is a policy rule's "
      "call_site):\n");
  for (size_t i = 0; i < a.swap_candidates.size() && i < top; ++i) {
    const report::SwapCandidate& c = a.swap_candidates[i];
    const uint64_t id = c.site < model.sites.size() ? model.sites[c.site].id : 0;
    std::printf("  %2zu. %9.3f GiB*s  %s, %s, longest idle %s  [%016llx] %s\n", i + 1,
                c.byte_seconds_idle / (1024.0 * 1024.0 * 1024.0),
                report::Plural(c.allocations, "allocation").c_str(),
                report::FormatBytes(c.bytes).c_str(), report::FormatDuration(c.max_idle_ns).c_str(),
                static_cast<unsigned long long>(id), report::SiteLabel(model, c.site).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, top_text;
  bool no_symbolize = false;
  spillway::CommandLine cl(
      {"spillway-inspect", kUsage, /*hint_only=*/true, {{"--top", "a number from 1 to 1000"}}});
  cl.Positional("TRACE", &path, /*required=*/true);
  cl.Option("--top", &top_text);
  cl.Flag("--no-symbolize", &no_symbolize);
  if (const std::optional<int> done = cl.ParseForMain(argc, argv)) return *done;
  size_t top = 5;
  if (cl.Given("--top")) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(top_text.c_str(), &end, 10);
    if (end == top_text.c_str() || *end != '\0' || n == 0 || n > 1000) {
      return FailUsage(absl::StrCat("--top wants a number from 1 to 1000, not '", top_text, "'"));
    }
    top = n;
  }
  const bool symbolize = !no_symbolize;
  absl::StatusOr<Counts> counts = CountRecords(path);
  if (!counts.ok()) return Fail(std::string(counts.status().message()));
  report::ProgressLine progress("spillway-inspect");
  absl::StatusOr<report::TraceModel> model = report::LoadTraceModel(
      path, [&](uint64_t done, uint64_t total) { progress.Update("reading", done, total); });
  if (!model.ok()) return Fail(std::string(model.status().message()));
  if (symbolize) report::Symbolize(*model);
  progress.Update("analyzing", 0, 0);
  report::Analysis analysis = report::Analyze(*model);
  report::UsePlannersStep(path, *model, &analysis);
  progress.Done();
  PrintHeader(path, *model, *counts, analysis);
  PrintPeak(*model, analysis, top);
  PrintStep(analysis);
  PrintSwapCandidates(*model, analysis, top);
  return 0;
}
