// Tests of the trace analysis on a synthetic training trace whose answers follow from how it was
// built: the peak and what is live at it, the step, working sets, swap candidates, UVM per site.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "profiler/report/trace_analysis.h"
#include "tests/profiler/report_synthetic_trace.h"

namespace spillway::report {
namespace {

using testing::kMiB;
using testing::ReorderedStepsTrace;
using testing::SyntheticPeak;
using testing::SyntheticShape;
using testing::SyntheticTrace;

TEST(AnalysisTest, PeakIsWeightsColdBufferAndOneStepOfActivations) {
  const TraceModel m = SyntheticTrace();
  const Peak peak = FindPeak(m);
  EXPECT_EQ(peak.bytes, SyntheticPeak());
  // 4 weights + cold buffer + 4 activations; the warm-up scratch is already freed.
  ASSERT_EQ(peak.live.size(), 9u);
  EXPECT_EQ(m.allocations[peak.live.front()].bytes, 512 * kMiB);  // largest first
  for (const uint64_t i : peak.live) EXPECT_NE(m.allocations[i].site, 3u);
  // The first time the peak is reached: the last forward allocation of the first step.
  const auto first_act = std::find_if(m.allocations.begin(), m.allocations.end(),
                                      [](const Allocation& a) { return a.site == 1; });
  EXPECT_EQ(peak.time_ns, (first_act + 3)->alloc_ns);
}

TEST(AnalysisTest, PeakIgnoresHostAllocationsAndCountsFreesFirstOnTies) {
  TraceModel m;
  m.allocations = {{1, 0, 100, AllocKind::kDevice, 0, 0, 10, 20},
                   {2, 0, 100, AllocKind::kDevice, 0, 0, 20, kNoTime},
                   {3, 0, 1000, AllocKind::kHost, 0, 0, 5, kNoTime}};
  const Peak peak = FindPeak(m);
  EXPECT_EQ(peak.bytes, 100u);
  EXPECT_EQ(peak.live.size(), 1u);
}

TEST(AnalysisTest, FindsTheStepAfterWarmUp) {
  const SyntheticShape shape;
  const TraceModel m = SyntheticTrace(shape);
  const Step step = FindStep(m);
  ASSERT_TRUE(step.found);
  EXPECT_EQ(step.launches_per_step, 2u * shape.layers + 1);
  EXPECT_EQ(step.steps, static_cast<uint64_t>(shape.steps));
  EXPECT_EQ(step.first_launch, static_cast<uint64_t>(shape.warmup_launches));
  EXPECT_EQ(step.median_step_ns, (2u * shape.layers + 1) * (shape.kernel_ns + 50'000));
  EXPECT_DOUBLE_EQ(step.in_steps_fraction,
                   static_cast<double>(step.steps * step.launches_per_step) /
                       static_cast<double>(m.launches.size()));
  EXPECT_GT(step.warmup_ns, 0u);
}

TEST(AnalysisTest, FindsTheStepDespiteAStrayLaunch) {
  SyntheticShape shape;
  shape.steps = 30;
  TraceModel m = SyntheticTrace(shape);
  // A logging kernel launched once, in the middle of step 20.
  m.functions.push_back("log");
  const size_t at = shape.warmup_launches + 20 * (2 * shape.layers + 1) + 4;
  m.launches.insert(m.launches.begin() + static_cast<std::ptrdiff_t>(at),
                    Launch{m.launches[at].time_ns,
                           7,
                           static_cast<uint32_t>(m.functions.size() - 1),
                           {},
                           kNoTime,
                           kNoTime});
  const Step step = FindStep(m);
  ASSERT_TRUE(step.found);
  EXPECT_EQ(step.launches_per_step, 2u * shape.layers + 1);
  EXPECT_GE(step.steps, 9u);  // the steps after the stray launch
  EXPECT_LT(step.in_steps_fraction, 0.5);
}

TEST(AnalysisTest, OneKernelOverDifferentTensorsIsNotAOneLaunchStep) {
  // One kernel applied to three tensors of different sizes, then the same three again: the step
  // is three launches, and each step's fresh allocations (new ids, same sizes) still match.
  TraceModel m;
  m.functions.push_back("scale");
  uint64_t id = 0;
  for (uint64_t s = 0; s < 10; ++s) {
    for (const uint64_t mib : {1, 2, 3}) {
      ++id;
      m.allocations.push_back(
          {id, id << 30, mib * kMiB, AllocKind::kDevice, 0, 0, id * 100, id * 100 + 50});
      m.launches.push_back({id * 100 + 10, 0, 0, {{id, 0, mib * kMiB}}, kNoTime, kNoTime});
    }
  }
  const Step step = FindStep(m);
  ASSERT_TRUE(step.found);
  EXPECT_EQ(step.launches_per_step, 3u);
  EXPECT_EQ(step.steps, 10u);
}

TEST(AnalysisTest, NoStepInANonRepeatingSequence) {
  TraceModel m;
  for (uint32_t f = 0; f < 50; ++f) {
    m.functions.push_back("k" + std::to_string(f));
    m.launches.push_back({f * 1000, 0, f, {}, kNoTime, kNoTime});
  }
  EXPECT_FALSE(FindStep(m).found);
}

// A step whose updates move among the backward launches differently every step is found, with the
// share of launches that came at another place; the same step in one order has none.
TEST(AnalysisTest, AStepWhoseLaunchOrderChangesIsFoundWithTheShareMoved) {
  const Step moved = FindStep(ReorderedStepsTrace(true));
  ASSERT_TRUE(moved.found);
  EXPECT_EQ(moved.launches_per_step, 36u);
  EXPECT_GT(moved.moved_fraction, 0.1);
  EXPECT_LT(moved.moved_fraction, 0.5);
  EXPECT_GE(moved.steps, 7u);
  const Step same = FindStep(ReorderedStepsTrace(false));
  ASSERT_TRUE(same.found);
  EXPECT_EQ(same.launches_per_step, 36u);
  EXPECT_EQ(same.moved_fraction, 0);
}

// Two threads that launch at once, each repeating its own step, interleaved at random: no step of
// the whole, one per thread.
TEST(AnalysisTest, ThreadsThatLaunchAtOnceHaveEachTheirOwnStep) {
  TraceModel m;
  for (const char* name : {"a0", "a1", "a2", "b0", "b1", "b2", "b3"}) m.functions.push_back(name);
  std::mt19937 random(5);
  std::bernoulli_distribution pick_b(0.5);
  uint32_t a = 0, b = 0;
  for (uint64_t t = 0; a < 60 || b < 80; ++t) {
    const bool from_b = a == 60 || (b < 80 && pick_b(random));
    Launch l;
    l.time_ns = t * 1000;
    l.function = from_b ? 3 + b++ % 4 : a++ % 3;
    l.thread = from_b ? 22 : 11;
    m.launches.push_back(l);
  }
  EXPECT_FALSE(FindStep(m).found);
  const std::vector<ThreadStep> steps = FindThreadSteps(m);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].thread, 11u);
  EXPECT_EQ(steps[0].launches, 60u);
  ASSERT_TRUE(steps[0].step.found);
  EXPECT_EQ(steps[0].step.launches_per_step, 3u);
  EXPECT_EQ(steps[1].thread, 22u);
  ASSERT_TRUE(steps[1].step.found);
  EXPECT_EQ(steps[1].step.launches_per_step, 4u);
  EXPECT_EQ(Analyze(m).thread_steps.size(), 2u);
  // One launching thread: nothing per thread.
  EXPECT_TRUE(FindThreadSteps(SyntheticTrace()).empty());
}

TEST(AnalysisTest, KernelWorkingSetsCountAccessBytesOrWholeAllocations) {
  const SyntheticShape shape;
  const TraceModel m = SyntheticTrace(shape);
  const std::vector<KernelWorkingSet> sets = KernelWorkingSets(m);
  ASSERT_FALSE(sets.empty());
  EXPECT_EQ(m.functions[sets.front().function], "optimizer");
  EXPECT_EQ(sets.front().max_bytes, shape.cold_bytes);
  EXPECT_EQ(sets.front().launches, static_cast<uint64_t>(shape.steps));
  EXPECT_EQ(sets.front().kernel_ns, shape.steps * shape.kernel_ns);
  // fwd_0: its weights plus a whole activation (the access gives no byte count).
  const auto fwd0 = std::find_if(sets.begin(), sets.end(), [&](const KernelWorkingSet& k) {
    return m.functions[k.function] == "fwd_0";
  });
  ASSERT_NE(fwd0, sets.end());
  EXPECT_EQ(fwd0->max_bytes, shape.weight_bytes + shape.activation_bytes);
  EXPECT_EQ(fwd0->max_allocations, 2u);
}

TEST(AnalysisTest, SwapCandidatesRankTheRarelyUsedLargeBufferFirst) {
  const TraceModel m = SyntheticTrace();
  const std::vector<SwapCandidate> c = SwapCandidates(m, m.EndTime());
  // The cold buffer (idle for most of a step), then the weights (idle between their forward and
  // backward uses), then the activations (smaller, idle from forward to backward), then the small
  // warm-up scratch buffer (idle while the other warm-up kernels run).
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[3].site, 3u);
  EXPECT_EQ(c[0].site, 2u);
  EXPECT_EQ(c[1].site, 0u);
  EXPECT_EQ(c[2].site, 1u);
  EXPECT_GT(c[0].byte_seconds_idle, c[1].byte_seconds_idle);
  EXPECT_GT(c[1].byte_seconds_idle, c[2].byte_seconds_idle);
  EXPECT_EQ(c[1].allocations, 4u);
  EXPECT_EQ(c[2].allocations, 4u * testing::SyntheticShape{}.steps);
}

TEST(AnalysisTest, FaultsAreAttributedToTheAllocatingSite) {
  const SyntheticShape shape;
  const TraceModel m = SyntheticTrace(shape);
  const std::vector<SiteFaults> f = FaultsBySite(m);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].site, 2u);
  EXPECT_EQ(f[0].faults, 40u * shape.steps);
  EXPECT_EQ(f[0].to_device_bytes, shape.cold_bytes * shape.steps);
  EXPECT_EQ(f[0].thrashing, 2u * shape.steps);
  EXPECT_EQ(f[1].site, 0u);
  EXPECT_EQ(f[1].faults, 3u * shape.steps);
}

TEST(AnalysisTest, TimelineKeepsThePeakAndStacksToTheTotal) {
  const TraceModel m = SyntheticTrace();
  AnalysisOptions options;
  options.timeline_points = 50;
  options.timeline_sites = 2;
  const Analysis a = Analyze(m, options);
  const MemoryTimeline& t = a.timeline;
  ASSERT_EQ(t.time_ns.size(), 50u);
  EXPECT_EQ(t.series_sites.size(), 2u);
  EXPECT_TRUE(t.has_other);
  EXPECT_EQ(*std::max_element(t.total.begin(), t.total.end()), SyntheticPeak());
  for (size_t i = 0; i < t.total.size(); ++i) {
    uint64_t sum = 0;
    for (const uint64_t v : t.by_series[i]) sum += v;
    EXPECT_EQ(sum, t.total[i]);
    if (i > 0) {
      EXPECT_GE(t.time_ns[i], t.time_ns[i - 1]);
    }
  }
  EXPECT_EQ(t.managed_resident.size(), t.time_ns.size());
}

TEST(AnalysisTest, EmptyTraceGivesEmptyAnswers) {
  const Analysis a = Analyze(TraceModel{});
  EXPECT_EQ(a.peak.bytes, 0u);
  EXPECT_FALSE(a.step.found);
  EXPECT_TRUE(a.kernels.empty());
  EXPECT_TRUE(a.swap_candidates.empty());
  EXPECT_TRUE(a.faults.empty());
}

TEST(AnalysisTest, SiteLabelPrefersSymbolsThenModuleAndOffset) {
  TraceModel m = SyntheticTrace();
  EXPECT_EQ(SiteLabel(m, 0), "libtrain.so+0x1000");
  m.sites[0].frames[0].symbol = "make_weights (train.cc:12)";
  EXPECT_EQ(SiteLabel(m, 0), "make_weights (train.cc:12)");
  EXPECT_EQ(SiteLabel(m, 99), "(unknown site)");
}

}  // namespace
}  // namespace spillway::report
