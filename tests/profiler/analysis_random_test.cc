// Robustness of the analysis, the report and the export on random models, including what a damaged
// or partial trace can hold: unknown sites, functions and allocation ids, frees before allocations,
// events before the header's start. Nothing may crash; the export must stay valid JSON.
#include <gtest/gtest.h>

#include <random>

#include "profiler/report/perfetto_export.h"
#include "profiler/report/report_html.h"
#include "profiler/report/trace_analysis.h"
#include "tests/profiler/report_json_check.h"

namespace spillway::report {
namespace {

TraceModel RandomModel(std::mt19937_64& rng) {
  const auto pick = [&rng](uint64_t n) {
    return std::uniform_int_distribution<uint64_t>(0, n)(rng);
  };
  TraceModel m;
  m.header.start_ns = pick(1'000'000);
  m.header.job = "random \"job\" <&>";
  for (uint64_t i = pick(3); i > 0; --i) m.modules.push_back({"abcd", i % 2 ? "/x/lib.so" : ""});
  for (uint64_t i = pick(4); i > 0; --i) {
    CallSite site;
    for (uint64_t f = pick(3); f > 0; --f)
      site.frames.push_back({static_cast<uint32_t>(pick(4)), pick(1 << 20), ""});
    m.sites.push_back(site);
  }
  for (uint64_t i = pick(5); i > 0; --i) m.functions.push_back("k" + std::to_string(i));
  for (uint64_t i = pick(40); i > 0; --i) {
    const uint64_t t = pick(2'000'000);
    m.allocations.push_back(
        {pick(50), pick(1 << 30), pick(1 << 28), static_cast<AllocKind>(pick(4)), pick(3),
         static_cast<uint32_t>(pick(6)), t, pick(3) == 0 ? kNoTime : pick(2'000'000)});
  }
  for (uint64_t i = pick(200); i > 0; --i) {
    Launch l;
    l.time_ns = pick(2'000'000);
    l.stream = pick(3);
    l.function = static_cast<uint32_t>(pick(6));
    for (uint64_t a = pick(3); a > 0; --a)
      l.accesses.push_back({pick(50), pick(100), pick(1 << 20)});
    if (pick(1)) {
      l.kernel_start_ns = pick(2'000'000);
      l.kernel_end_ns = pick(2'000'000);
    }
    m.launches.push_back(std::move(l));
  }
  for (uint64_t i = pick(5); i > 0; --i) {
    m.copies.push_back({static_cast<Copy::Kind>(pick(1)), pick(2'000'000),
                        pick(1) ? kNoTime : pick(2'000'000), pick(3), pick(1 << 20), "HtoD"});
  }
  for (uint64_t i = pick(10); i > 0; --i) {
    m.uvm.push_back(
        {static_cast<UvmEvent::Kind>(pick(3)), pick(2'000'000), pick(50), pick(1 << 21), pick(9)});
  }
  for (uint64_t i = pick(5); i > 0; --i) m.resident.push_back({pick(2'000'000), pick(1 << 30)});
  std::sort(m.resident.begin(), m.resident.end(),
            [](const ResidentSample& a, const ResidentSample& b) { return a.time_ns < b.time_ns; });
  return m;
}

TEST(AnalysisRandomTest, RandomModelsNeverBreakTheReportOrTheExport) {
  std::mt19937_64 rng(20261123);
  for (int round = 0; round < 300; ++round) {
    const TraceModel m = RandomModel(rng);
    const Analysis a = Analyze(m);
    EXPECT_LE(a.start_ns, a.end_ns);
    const std::string html = RenderHtmlReport(m, a);
    EXPECT_NE(html.find("</html>"), std::string::npos);
    testing::JsonCheck check;
    const std::string json = ChromeTraceJson(m);
    ASSERT_TRUE(check.Parse(json)) << "round " << round << " offset " << check.error_offset();
  }
}

}  // namespace
}  // namespace spillway::report
