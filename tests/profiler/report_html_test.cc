// Tests of the HTML report: self-contained, with its charts, the peak, the step and the tables.
#include "profiler/report/report_html.h"

#include <gtest/gtest.h>

#include <random>

#include "absl/strings/match.h"
#include "profiler/report/report_svg.h"
#include "tests/profiler/report_synthetic_trace.h"

namespace spillway::report {
namespace {

size_t Count(const std::string& text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ReportHtmlTest, HasEveryPlotAndSection) {
  const TraceModel m = testing::SyntheticTrace();
  const std::string html = RenderHtmlReport(m, Analyze(m));
  EXPECT_GT(html.size(), 10000u);
  EXPECT_TRUE(absl::StartsWith(html, "<!DOCTYPE html>"));
  EXPECT_EQ(Count(html, "<svg"), 3u);  // memory, one step, kernel working sets
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  EXPECT_TRUE(absl::StrContains(html, "class=\"peak\""));
  EXPECT_TRUE(absl::StrContains(html, "peak 896 MiB"));
  EXPECT_TRUE(absl::StrContains(html, "<span>launches per step</span><b>9</b>"));
  EXPECT_TRUE(absl::StrContains(html, "<span>steps found</span><b>6</b>"));
  EXPECT_TRUE(absl::StrContains(html, "Swap candidates"));
  EXPECT_TRUE(absl::StrContains(html, "Unified-memory faults"));
  EXPECT_TRUE(absl::StrContains(html, "libtrain.so+0x1080"));  // the cold buffer's site
  EXPECT_TRUE(absl::StrContains(html, "time (ms)"));
  EXPECT_TRUE(absl::StrContains(html, "live (MiB)"));
  EXPECT_TRUE(absl::StrContains(html, "class=\"line\""));  // managed resident
}

TEST(ReportHtmlTest, IsSelfContainedAndEscapesNames) {
  TraceModel m = testing::SyntheticTrace();
  m.functions[0] = "void gemm<float, 128>(float const*)";
  m.header.job = "train.py --x '<script>'";
  const std::string html = RenderHtmlReport(m, Analyze(m));
  EXPECT_FALSE(absl::StrContains(html, "<script"));
  EXPECT_FALSE(absl::StrContains(html, "http://"));
  EXPECT_FALSE(absl::StrContains(html, "https://"));
  EXPECT_FALSE(absl::StrContains(html, "src="));
  EXPECT_TRUE(absl::StrContains(html, "gemm&lt;float, 128&gt;"));
}

TEST(ReportHtmlTest, EmptyTraceSaysSo) {
  const TraceModel m;
  const std::string html = RenderHtmlReport(m, Analyze(m));
  EXPECT_TRUE(absl::StrContains(html, "No device allocations were recorded."));
  EXPECT_TRUE(absl::StrContains(html, "No repeating step was found"));
  EXPECT_TRUE(absl::StrContains(html, "No launches were recorded."));
}

// Launches of two threads interleaved at random, each repeating its own step: the step section
// lists each thread's.
TEST(ReportHtmlTest, NoStepOfTheWholeListsEachThreadsOwn) {
  TraceModel m;
  m.functions = {"a", "b", "c", "d", "e"};
  std::mt19937 random(9);
  std::bernoulli_distribution pick_8(0.5);
  uint32_t of_7 = 0, of_8 = 0;
  for (uint64_t i = 0; of_7 < 40 || of_8 < 60; ++i) {
    Launch l;
    l.time_ns = i * 1000;
    l.thread = of_7 == 40 || (of_8 < 60 && pick_8(random)) ? 8 : 7;
    l.function = l.thread == 7 ? of_7++ % 2 : 2 + of_8++ % 3;
    m.launches.push_back(l);
  }
  const Analysis a = Analyze(m);
  ASSERT_FALSE(a.step.found);
  const std::string html = RenderHtmlReport(m, a);
  EXPECT_TRUE(absl::StrContains(html, "They came from 2 threads")) << html;
  EXPECT_TRUE(absl::StrContains(html, "<li>thread 7: 40 launches, a step of 2 launches")) << html;
  EXPECT_TRUE(absl::StrContains(html, "<li>thread 8: 60 launches, a step of 3 launches")) << html;
}

TEST(ReportHtmlTest, AStepWhoseLaunchOrderChangesSaysSo) {
  const TraceModel moved = testing::ReorderedStepsTrace(true);
  const std::string html = RenderHtmlReport(moved, Analyze(moved));
  EXPECT_TRUE(absl::StrContains(html, "(the launch order changes from step to step")) << html;
  const TraceModel same = testing::ReorderedStepsTrace(false);
  EXPECT_FALSE(absl::StrContains(RenderHtmlReport(same, Analyze(same)), "order changes"));
}

TEST(ReportSvgTest, UnitsAndTicks) {
  EXPECT_EQ(ByteUnitFor(512).name, "B");
  EXPECT_EQ(ByteUnitFor(3u << 20).name, "MiB");
  EXPECT_EQ(ByteUnitFor(uint64_t{5} << 30).name, "GiB");
  EXPECT_EQ(TimeUnitFor(500'000).name, "µs");
  EXPECT_EQ(TimeUnitFor(30'000'000).name, "ms");
  EXPECT_EQ(TimeUnitFor(3'000'000'000).name, "s");
  EXPECT_EQ(FormatBytes(1536u << 20), "1.5 GiB");
  EXPECT_EQ(FormatDuration(45'000'000), "45 ms");
  const std::vector<double> ticks = NiceTicks(1000, 5);
  ASSERT_EQ(ticks.size(), 6u);
  EXPECT_EQ(ticks[1], 200);
  EXPECT_EQ(HtmlEscape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
}

}  // namespace
}  // namespace spillway::report
