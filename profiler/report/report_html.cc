// Lays out the HTML report: sections of tables and inline-SVG charts (report_svg.h).
#include "profiler/report/report_html.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "profiler/report/report_svg.h"

namespace spillway::report {
namespace {

constexpr size_t kTableRows = 20;

constexpr const char* kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;
background:#f6f7f9;margin:0}
main{max-width:1180px;margin:0 auto;padding:20px 28px 60px}
h1{font-size:24px;margin:8px 0 2px}h2{font-size:18px;margin:30px 0 8px;border-bottom:1px solid
#d8dce3;padding-bottom:4px}
.sub{color:#5b6475;margin:0 0 14px}
section{background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:6px 18px 14px;
margin-top:16px}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:8px 20px;
margin:10px 0}
.fact b{display:block;font-size:18px}.fact span{color:#5b6475;font-size:12px;
text-transform:uppercase;letter-spacing:.04em}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eceef2;vertical-align:top}
th{color:#5b6475;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
svg.chart{width:100%;height:auto;display:block;margin:6px 0}
.grid{stroke:#e6e8ee;stroke-width:1}.axis{stroke:#6b7280;stroke-width:1}
.guide{stroke:#9aa3b2;stroke-width:1;stroke-dasharray:2 4}
.tick{font-size:12px;fill:#4b5563}.label{font-size:13px;fill:#1f2937}
.barlabel{font:12px ui-monospace,Menlo,Consolas,monospace;fill:#1f2937}
.area{stroke:#fff;stroke-width:.4;opacity:.92}.line{fill:none;stroke:#111827;stroke-width:1.6;
stroke-dasharray:6 3}
.peak line{stroke:#b91c1c;stroke-width:1.5;stroke-dasharray:4 3}.peak circle{fill:#b91c1c}
.peak text{font-size:13px;font-weight:600;fill:#b91c1c}
.legend{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:12px;margin:4px 0 0}
.legend i{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;
vertical-align:-1px}
.note{color:#5b6475;font-size:12px}
)css";

struct Fact {
  std::string label, value;
};

std::string Facts(const std::vector<Fact>& facts) {
  std::string out = "<div class=\"facts\">";
  for (const Fact& f : facts) {
    absl::StrAppend(&out, "<div class=\"fact\"><span>", HtmlEscape(f.label), "</span><b>",
                    HtmlEscape(f.value), "</b></div>");
  }
  return out + "</div>";
}

std::string OrUnknown(const std::string& s) { return s.empty() ? "unknown" : s; }

// A site's frames, innermost first, one per line (at most `max` of them).
std::string SiteFrames(const TraceModel& model, uint32_t site, size_t max) {
  if (site >= model.sites.size()) return "<code>(unknown site)</code>";
  std::string out;
  const auto& frames = model.sites[site].frames;
  for (size_t i = 0; i < frames.size() && i < max; ++i) {
    const Frame& f = frames[i];
    std::string module = f.module < model.modules.size() ? model.modules[f.module].path : "?";
    if (module.empty()) module = model.modules[f.module].build_id;
    const std::string raw = absl::StrFormat("%s+0x%x", module, f.offset);
    absl::StrAppend(&out, i ? "<br>" : "", "<code title=\"", HtmlEscape(raw), "\">",
                    HtmlEscape(f.symbol.empty() ? raw : f.symbol), "</code>");
  }
  if (frames.size() > max)
    absl::StrAppend(&out, "<br><span class=\"note\">… ", frames.size() - max,
                    " more frames</span>");
  return out.empty() ? "<code>(no frames)</code>" : out;
}

std::string Header(const TraceModel& model, const Analysis& a) {
  const TraceHeader& h = model.header;
  std::string out = absl::StrCat("<h1>spillway report</h1><p class=\"sub\">",
                                 HtmlEscape(OrUnknown(h.job)), "</p><section>");
  std::vector<Fact> facts = {
      {"device", OrUnknown(h.device)},
      {"duration", FormatDuration(a.end_ns - a.start_ns)},
      {"peak live", FormatBytes(a.peak.bytes)},
      {"allocations",
       absl::StrCat(model.allocations.size(), " (", FormatBytes(a.total_allocated_bytes), ")")},
      {"launches", absl::StrCat(model.launches.size())},
      {"kernels", absl::StrCat(a.kernels.size())},
      {"memcpy / memset",
       absl::StrCat(FormatBytes(a.memcpy_bytes), " / ", FormatBytes(a.memset_bytes))},
      {"dropped records", absl::StrCat(h.dropped_records)},
  };
  if (h.device_memory_bytes)
    facts.insert(facts.begin() + 1, {"device memory", FormatBytes(h.device_memory_bytes)});
  absl::StrAppend(
      &out, Facts(facts), "<p class=\"note\">CUDA ", HtmlEscape(OrUnknown(h.cuda_version)),
      " · driver ", HtmlEscape(OrUnknown(h.driver_version)), " · spillway ",
      HtmlEscape(OrUnknown(h.spillway_version)), " · ", model.synchronizations, " synchronizations",
      h.dropped_records ? " · <b>records were dropped: totals are lower bounds</b>" : "",
      "</p></section>");
  return out;
}

std::string MemorySection(const TraceModel& model, const Analysis& a) {
  std::string out = "<section><h2>Memory over time</h2>";
  const MemoryTimeline& t = a.timeline;
  if (t.time_ns.empty() || a.peak.bytes == 0) {
    return out + "<p>No device allocations were recorded.</p></section>";
  }
  AreaChart chart;
  chart.title = "live device memory over time, stacked by allocating site";
  for (const uint64_t x : t.time_ns) chart.x_ns.push_back(x - a.start_ns);
  chart.x_max_ns = a.end_ns - a.start_ns;
  const size_t series = t.series_sites.size() + (t.has_other ? 1 : 0);
  for (size_t s = 0; s < series; ++s) {
    AreaSeries area;
    area.label = s < t.series_sites.size() ? SiteLabel(model, t.series_sites[s]) : "other sites";
    for (const auto& point : t.by_series) area.values.push_back(point[s]);
    chart.stacked.push_back(std::move(area));
  }
  chart.line = t.managed_resident;
  while (!model.resident.empty() && chart.line_from < t.time_ns.size() &&
         t.time_ns[chart.line_from] < model.resident.front().time_ns) {
    ++chart.line_from;
  }
  chart.line_label = "managed memory resident on the device";
  chart.has_mark = true;
  chart.mark_x_ns = a.peak.time_ns - a.start_ns;
  chart.mark_y = a.peak.bytes;
  chart.mark_label = absl::StrCat("peak ", FormatBytes(a.peak.bytes), " at ",
                                  FormatDuration(a.peak.time_ns - a.start_ns));
  if (a.step.found && a.step.steps <= 60) {
    for (uint64_t k = 0; k <= a.step.steps; ++k) {
      const uint64_t i = a.step.first_launch + k * a.step.launches_per_step;
      if (i < model.launches.size())
        chart.guides_ns.push_back(model.launches[i].time_ns - a.start_ns);
    }
  }
  absl::StrAppend(&out, RenderAreaChart(chart), "<div class=\"legend\">");
  for (size_t s = 0; s < series; ++s) {
    absl::StrAppend(&out, "<span><i style=\"background:", SeriesColor(s), "\"></i>",
                    HtmlEscape(chart.stacked[s].label), "</span>");
  }
  if (!chart.line.empty()) {
    absl::StrAppend(&out,
                    "<span><i style=\"background:#111827\"></i>managed resident "
                    "(dashed)</span>");
  }
  if (!chart.guides_ns.empty()) {
    absl::StrAppend(&out, "<span class=\"note\">dotted lines: training-step starts</span>");
  }
  return out + "</div></section>";
}

std::string PeakSection(const TraceModel& model, const Analysis& a) {
  std::string out = absl::StrCat("<section><h2>Live at the peak (", FormatBytes(a.peak.bytes),
                                 " at ", FormatDuration(a.peak.time_ns - a.start_ns), ")</h2>");
  // By site first: who holds the peak.
  absl::flat_hash_map<uint32_t, std::pair<uint64_t, uint64_t>> by_site;  // site -> count, bytes
  for (const uint64_t i : a.peak.live) {
    auto& [count, bytes] = by_site[model.allocations[i].site];
    ++count;
    bytes += model.allocations[i].bytes;
  }
  std::vector<std::pair<uint32_t, std::pair<uint64_t, uint64_t>>> sites(by_site.begin(),
                                                                        by_site.end());
  std::sort(sites.begin(), sites.end(), [](const auto& x, const auto& y) {
    return x.second.second != y.second.second ? x.second.second > y.second.second
                                              : x.first < y.first;
  });
  absl::StrAppend(&out,
                  "<table><tr><th class=\"n\">bytes</th><th class=\"n\">share</th>"
                  "<th class=\"n\">allocations</th><th>allocated at</th></tr>");
  for (size_t i = 0; i < sites.size() && i < kTableRows; ++i) {
    const auto& [site, cb] = sites[i];
    absl::StrAppend(
        &out, "<tr><td class=\"n\">", FormatBytes(cb.second), "</td><td class=\"n\">",
        absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(cb.second) /
                                      static_cast<double>(std::max<uint64_t>(a.peak.bytes, 1))),
        "</td><td class=\"n\">", cb.first, "</td><td>", SiteFrames(model, site, 3), "</td></tr>");
  }
  absl::StrAppend(&out, "</table><p class=\"note\">", a.peak.live.size(),
                  " allocations live at the peak; largest:</p><table><tr><th>id</th>"
                  "<th class=\"n\">bytes</th><th>kind</th><th class=\"n\">age at peak</th>"
                  "<th>freed</th><th>site</th></tr>");
  for (size_t i = 0; i < a.peak.live.size() && i < 10; ++i) {
    const Allocation& al = model.allocations[a.peak.live[i]];
    absl::StrAppend(&out, "<tr><td>", al.id, "</td><td class=\"n\">", FormatBytes(al.bytes),
                    "</td><td>", AllocKindName(al.kind), "</td><td class=\"n\">",
                    FormatDuration(a.peak.time_ns - al.alloc_ns), "</td><td>",
                    al.free_ns == kNoTime
                        ? "never"
                        : FormatDuration(al.free_ns - std::min(al.free_ns, a.start_ns)),
                    "</td><td><code>", HtmlEscape(SiteLabel(model, al.site)), "</code></td></tr>");
  }
  return out + "</table></section>";
}

std::string StepSection(const TraceModel& model, const Analysis& a) {
  std::string out = "<section><h2>The training step</h2>";
  const Step& s = a.step;
  if (!s.found) {
    absl::StrAppend(&out, "<p>No repeating step was found in the launch sequence (",
                    model.launches.size(), " launches).");
    if (a.thread_steps.empty()) return out + "</p></section>";
    // Threads launching at once interleave differently every step: each thread's own step.
    absl::StrAppend(&out, " They came from ", a.thread_steps.size(),
                    " threads, each with its own step where one repeats:</p><ul>");
    for (const ThreadStep& t : a.thread_steps) {
      absl::StrAppend(&out, "<li>", HtmlEscape(ThreadStepLabel(t)), "</li>");
    }
    return out + "</ul></section>";
  }
  absl::StrAppend(
      &out,
      Facts({{"launches per step", absl::StrCat(s.launches_per_step)},
             {"steps found", absl::StrCat(s.steps)},
             {"step time (median)", FormatDuration(s.median_step_ns)},
             {"warm-up before the first step", FormatDuration(s.warmup_ns)},
             {"launches inside the steps", absl::StrFormat("%.1f%%", 100 * s.in_steps_fraction)},
             {"launches at another place than one step before",
              s.moved_fraction > 0
                  ? absl::StrFormat("%.1f%% (the launch order changes from step to step: no plan "
                                    "can follow it; spillway run's learned policy does)",
                                    100 * s.moved_fraction)
                  : std::string("none")}}));
  // One step, launch by launch: how many bytes each launch touches.
  absl::flat_hash_map<uint64_t, uint64_t> bytes_of;
  for (const Allocation& al : model.allocations) bytes_of[al.id] = al.bytes;
  std::vector<Bar> bars;
  std::vector<size_t> colors;
  absl::flat_hash_map<uint32_t, size_t> color_of_function;
  const size_t shown = std::min<uint64_t>(s.launches_per_step, 400);
  for (size_t i = 0; i < shown; ++i) {
    const Launch& l = model.launches[s.first_launch + i];
    uint64_t bytes = 0;
    for (const Access& acc : l.accesses) {
      bytes +=
          acc.bytes ? acc.bytes : (bytes_of.contains(acc.alloc_id) ? bytes_of[acc.alloc_id] : 0);
    }
    const std::string& name =
        l.function < model.functions.size() ? model.functions[l.function] : std::string("?");
    bars.push_back({name, bytes, absl::StrCat("#", i, " ", name, ": ", FormatBytes(bytes))});
    colors.push_back(
        color_of_function.try_emplace(l.function, color_of_function.size()).first->second);
  }
  absl::StrAppend(&out, "<p class=\"note\">Bytes each launch of one step touches (",
                  shown < s.launches_per_step ? "first 400 launches, " : "",
                  "one color per kernel):</p>",
                  RenderColumnBars("bytes touched by each launch of one step",
                                   "launch within the step", bars, colors),
                  "</section>");
  return out;
}

std::string KernelSection(const TraceModel& model, const Analysis& a) {
  std::string out = "<section><h2>Per-kernel working sets</h2>";
  if (a.kernels.empty()) return out + "<p>No launches were recorded.</p></section>";
  std::vector<Bar> bars;
  for (size_t i = 0; i < a.kernels.size() && i < kTableRows; ++i) {
    const KernelWorkingSet& k = a.kernels[i];
    const std::string& name = model.functions[k.function];
    bars.push_back({name, k.max_bytes,
                    absl::StrCat(name, ": up to ", FormatBytes(k.max_bytes), " over ",
                                 k.max_allocations, " allocations, ", k.launches, " launches")});
  }
  absl::StrAppend(&out, RenderByteBars("largest bytes one launch of each kernel touches", bars),
                  "<table><tr><th>kernel</th><th class=\"n\">launches</th><th class=\"n\">"
                  "max working set</th><th class=\"n\">mean</th><th class=\"n\">max "
                  "allocations</th><th class=\"n\">device time</th></tr>");
  for (size_t i = 0; i < a.kernels.size() && i < kTableRows; ++i) {
    const KernelWorkingSet& k = a.kernels[i];
    absl::StrAppend(&out, "<tr><td><code>", HtmlEscape(model.functions[k.function]),
                    "</code></td><td class=\"n\">", k.launches, "</td><td class=\"n\">",
                    FormatBytes(k.max_bytes), "</td><td class=\"n\">", FormatBytes(k.mean_bytes),
                    "</td><td class=\"n\">", k.max_allocations, "</td><td class=\"n\">",
                    k.kernel_ns ? FormatDuration(k.kernel_ns) : "—", "</td></tr>");
  }
  return out + "</table></section>";
}

std::string SwapSection(const TraceModel& model, const Analysis& a) {
  std::string out =
      "<section><h2>Swap candidates</h2><p class=\"note\">Allocating sites ranked by bytes × "
      "idle time, counting only the idle gaps longer than moving the data out and back in at "
      "the host link's speed.</p>";
  if (a.swap_candidates.empty()) {
    return out + "<p>No allocation sits idle long enough to be worth moving.</p></section>";
  }
  absl::StrAppend(&out,
                  "<table><tr><th class=\"n\">score (GiB·s)</th><th class=\"n\">bytes</th>"
                  "<th class=\"n\">allocations</th><th class=\"n\">longest idle</th>"
                  "<th>allocated at</th></tr>");
  for (size_t i = 0; i < a.swap_candidates.size() && i < kTableRows; ++i) {
    const SwapCandidate& c = a.swap_candidates[i];
    absl::StrAppend(&out, "<tr><td class=\"n\">",
                    absl::StrFormat("%.4g", c.byte_seconds_idle / (1024.0 * 1024 * 1024)),
                    "</td><td class=\"n\">", FormatBytes(c.bytes), "</td><td class=\"n\">",
                    c.allocations, "</td><td class=\"n\">", FormatDuration(c.max_idle_ns),
                    "</td><td>", SiteFrames(model, c.site, 3), "</td></tr>");
  }
  return out + "</table></section>";
}

std::string FaultSection(const TraceModel& model, const Analysis& a) {
  if (a.faults.empty()) return "";
  std::string out =
      "<section><h2>Unified-memory faults and migrations by site</h2><table><tr>"
      "<th class=\"n\">faults</th><th class=\"n\">to device</th><th class=\"n\">to "
      "host</th><th class=\"n\">thrashing</th><th>allocated at</th></tr>";
  for (size_t i = 0; i < a.faults.size() && i < kTableRows; ++i) {
    const SiteFaults& f = a.faults[i];
    absl::StrAppend(&out, "<tr><td class=\"n\">", f.faults, "</td><td class=\"n\">",
                    FormatBytes(f.to_device_bytes), "</td><td class=\"n\">",
                    FormatBytes(f.to_host_bytes), "</td><td class=\"n\">", f.thrashing, "</td><td>",
                    SiteFrames(model, f.site, 3), "</td></tr>");
  }
  return out + "</table></section>";
}

}  // namespace

std::string RenderHtmlReport(const TraceModel& model, const Analysis& analysis) {
  return absl::StrCat(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
      "<title>spillway report: ",
      HtmlEscape(OrUnknown(model.header.job)), "</title><style>", kStyle,
      "</style></head><body><main>", Header(model, analysis), MemorySection(model, analysis),
      PeakSection(model, analysis), StepSection(model, analysis), KernelSection(model, analysis),
      SwapSection(model, analysis), FaultSection(model, analysis), "</main></body></html>\n");
}

}  // namespace spillway::report
