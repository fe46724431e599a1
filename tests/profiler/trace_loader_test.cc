// Tests of LoadTraceModel: the synthetic training trace written through the TraceWriter loads
// back as the same model (allocations with their frees, launches with accesses and kernel times,
// copies, UVM attributed to allocations, sites, modules) and analyzes the same; frees without an
// id pair by address; odd values in a valid trace do not crash the analysis or the HTML; a
// truncated trace is an error naming the file.
#include <memory>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "profiler/report/report_html.h"
#include "profiler/report/trace_analysis.h"
#include "profiler/report/trace_model_loader.h"
#include "profiler/trace/trace_writer.h"
#include "tests/profiler/report_synthetic_trace.h"
#include "tests/profiler/trace_from_model.h"
#include "tests/profiler/trace_test_util.h"

namespace spillway::report {
namespace {

using trace::testing::TempPath;

uint64_t Shifted(uint64_t t, uint64_t shift) { return t == kNoTime ? kNoTime : t + shift; }

TEST(TraceLoader, SyntheticTraceLoadsBackAsTheSameModel) {
  TempPath path("synthetic.trace");
  const TraceModel m = testing::SyntheticTrace();
  const absl::StatusOr<uint64_t> shift = testing::WriteModelAsTrace(m, path.path());
  ASSERT_TRUE(shift.ok()) << shift.status();
  uint64_t progress_calls = 0, last_done = 0;
  absl::StatusOr<TraceModel> loaded =
      LoadTraceModel(path.path(), [&](uint64_t done, uint64_t total) {
        ++progress_calls;
        EXPECT_LE(done, total);
        last_done = done;
      });
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_GE(progress_calls, 1u);
  const uint64_t s = *shift;

  EXPECT_EQ(loaded->header.job, m.header.job);
  EXPECT_EQ(loaded->header.device, m.header.device);
  EXPECT_EQ(loaded->header.driver_version, m.header.driver_version);
  EXPECT_EQ(loaded->header.start_ns, m.header.start_ns + s);
  EXPECT_EQ(loaded->header.dropped_records, 0u);
  EXPECT_GE(loaded->header.end_ns, m.EndTime() + s);

  ASSERT_EQ(loaded->modules.size(), m.modules.size());
  EXPECT_EQ(loaded->modules[0].path, m.modules[0].path);
  ASSERT_EQ(loaded->sites.size(), m.sites.size());
  for (size_t i = 0; i < m.sites.size(); ++i) {
    ASSERT_EQ(loaded->sites[i].frames.size(), m.sites[i].frames.size());
    EXPECT_EQ(loaded->sites[i].frames[0].offset, m.sites[i].frames[0].offset);
    EXPECT_EQ(loaded->sites[i].frames[0].module, m.sites[i].frames[0].module);
  }

  ASSERT_EQ(loaded->allocations.size(), m.allocations.size());
  for (size_t i = 0; i < m.allocations.size(); ++i) {
    const Allocation &a = loaded->allocations[i], &b = m.allocations[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.address, b.address);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.site, b.site);
    EXPECT_EQ(a.alloc_ns, b.alloc_ns + s);
    EXPECT_EQ(a.free_ns, Shifted(b.free_ns, s)) << "allocation " << b.id;
  }
  ASSERT_EQ(loaded->launches.size(), m.launches.size());
  for (size_t i = 0; i < m.launches.size(); ++i) {
    const Launch &a = loaded->launches[i], &b = m.launches[i];
    EXPECT_EQ(loaded->functions[a.function], m.functions[b.function]);
    EXPECT_EQ(a.time_ns, b.time_ns + s);
    EXPECT_EQ(a.stream, b.stream);
    EXPECT_EQ(a.kernel_start_ns, Shifted(b.kernel_start_ns, s));
    EXPECT_EQ(a.kernel_end_ns, Shifted(b.kernel_end_ns, s));
    ASSERT_EQ(a.accesses.size(), b.accesses.size());
    for (size_t j = 0; j < a.accesses.size(); ++j) {
      EXPECT_EQ(a.accesses[j].alloc_id, b.accesses[j].alloc_id);
      EXPECT_EQ(a.accesses[j].bytes, b.accesses[j].bytes);
    }
  }
  ASSERT_EQ(loaded->copies.size(), m.copies.size());
  for (size_t i = 0; i < m.copies.size(); ++i) {
    EXPECT_EQ(loaded->copies[i].kind, m.copies[i].kind);
    EXPECT_EQ(loaded->copies[i].bytes, m.copies[i].bytes);
    EXPECT_EQ(loaded->copies[i].direction, m.copies[i].direction);
    EXPECT_EQ(loaded->copies[i].end_ns, Shifted(m.copies[i].end_ns, s));
  }
  ASSERT_EQ(loaded->uvm.size(), m.uvm.size());
  for (size_t i = 0; i < m.uvm.size(); ++i) {
    EXPECT_EQ(loaded->uvm[i].kind, m.uvm[i].kind);
    EXPECT_EQ(loaded->uvm[i].alloc_id, m.uvm[i].alloc_id);
    EXPECT_EQ(loaded->uvm[i].bytes, m.uvm[i].bytes);
    EXPECT_EQ(loaded->uvm[i].count, m.uvm[i].count);
  }
  ASSERT_EQ(loaded->resident.size(), m.resident.size());
  EXPECT_EQ(loaded->resident[0].bytes, m.resident[0].bytes);
  EXPECT_EQ(loaded->synchronizations, m.synchronizations);

  // And the analysis finds what it finds on the model itself.
  const Analysis a = Analyze(*loaded), b = Analyze(m);
  EXPECT_EQ(a.peak.bytes, testing::SyntheticPeak());
  EXPECT_EQ(a.peak.time_ns, b.peak.time_ns + s);
  ASSERT_TRUE(a.step.found);
  EXPECT_EQ(a.step.launches_per_step, b.step.launches_per_step);
  EXPECT_EQ(a.step.steps, b.step.steps);
  ASSERT_FALSE(a.swap_candidates.empty());
  EXPECT_EQ(a.swap_candidates[0].site, b.swap_candidates[0].site);
  EXPECT_EQ(a.faults.size(), b.faults.size());
}

// A trace writer flushed by hand, its header starting at `t0`.
std::unique_ptr<trace::TraceWriter> OpenWriter(const TempPath& path, uint64_t t0) {
  trace::WriterOptions options;
  options.flush = trace::WriterOptions::Flush::kManual;
  trace::HeaderRecord header = trace::testing::TestHeader();
  header.start_ns = t0;
  auto writer = trace::TraceWriter::Open(path.path(), header, options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  return writer.ok() ? std::move(*writer) : nullptr;
}

TEST(TraceLoader, PairsFreesByAddressAndLeavesStraysAlone) {
  TempPath path("pairing.trace");
  const uint64_t t0 = trace::TraceClockNs() - 1'000'000;
  std::unique_ptr<trace::TraceWriter> writer = OpenWriter(path, t0);
  ASSERT_NE(writer, nullptr);
  trace::TraceWriter& w = *writer;
  // Two allocations at the same address one after the other; frees carry no id.
  w.Write(trace::AllocRecord{t0 + 10, 1, trace::AllocKind::kDevice, 0x1000, 64, 0, 0, 1});
  w.Write(trace::FreeRecord{t0 + 20, 1, 0x1000, 0, 0});
  w.Write(trace::AllocRecord{t0 + 30, 1, trace::AllocKind::kDevice, 0x1000, 128, 0, 0, 2});
  w.Write(trace::FreeRecord{t0 + 40, 1, 0x1000, 0, 0});
  w.Write(trace::FreeRecord{t0 + 50, 1, 0x9999, 0, 0});  // unknown
  w.Write(trace::UvmCounterRecord{trace::UvmKind::kGpuPageFault, t0 + 35, 0, 0x1010, 0, 4});
  w.Write(trace::UvmCounterRecord{trace::UvmKind::kGpuPageFault, t0 + 36, 0, 0x5000, 0, 1});
  w.Write(trace::UvmCounterRecord{trace::UvmKind::kThrottling, t0 + 37, 0, 0x1010, 0, 1});
  w.Write(trace::LaunchRecord{t0 + 33, 1, 0, 0xf00, 0, {1, 1, 1}, {1, 1, 1}, 0, 5, {}});
  ASSERT_TRUE(w.Close().ok());
  absl::StatusOr<TraceModel> m = LoadTraceModel(path.path());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->allocations.size(), 2u);
  EXPECT_EQ(m->allocations[0].free_ns, t0 + 20);
  EXPECT_EQ(m->allocations[1].free_ns, t0 + 40);
  EXPECT_EQ(m->allocations[0].site, 0u);  // no sites: one past the last, i.e. unknown
  ASSERT_EQ(m->uvm.size(), 2u);           // throttling is not shown
  EXPECT_EQ(m->uvm[0].alloc_id, 2u);
  EXPECT_EQ(m->uvm[0].count, 4u);
  EXPECT_EQ(m->uvm[1].alloc_id, 0u);
  ASSERT_EQ(m->functions.size(), 1u);
  EXPECT_EQ(m->functions[0], "function 0xf00");
  EXPECT_EQ(m->launches[0].kernel_start_ns, kNoTime);
}

// A graph launch is one launch of "graph 0x<exec>" with its access set, its kernel time from its
// first kernel's start to its last kernel's end.
TEST(TraceLoader, AGraphLaunchIsOneLaunchWithItsAccessSet) {
  TempPath path("graph.trace");
  const uint64_t t0 = trace::TraceClockNs() - 1'000'000;
  std::unique_ptr<trace::TraceWriter> writer = OpenWriter(path, t0);
  ASSERT_NE(writer, nullptr);
  trace::TraceWriter& w = *writer;
  w.Write(trace::AllocRecord{t0 + 10, 1, trace::AllocKind::kManaged, 0x1000, 64, 0, 0, 1});
  const trace::AccessRecord touched[] = {{1, 0, 0}};
  w.Write(trace::GraphLaunchRecord{t0 + 20, 1, 0x9a, 3, 7, touched});
  // Two kernel nodes timed under the graph launch's correlation id, as CUPTI times them.
  w.Write(trace::KernelTimeRecord{7, t0 + 30, t0 + 60, 0, 3, trace::Activity::kKernel,
                                  trace::KernelTimeRecord::kCupti});
  w.Write(trace::KernelTimeRecord{7, t0 + 70, t0 + 90, 0, 3, trace::Activity::kKernel,
                                  trace::KernelTimeRecord::kCupti});
  ASSERT_TRUE(w.Close().ok());
  absl::StatusOr<TraceModel> m = LoadTraceModel(path.path());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->launches.size(), 1u);
  ASSERT_EQ(m->functions.size(), 1u);
  EXPECT_EQ(m->functions[0], "graph 0x9a");
  ASSERT_EQ(m->launches[0].accesses.size(), 1u);
  EXPECT_EQ(m->launches[0].accesses[0].alloc_id, 1u);
  EXPECT_EQ(m->launches[0].kernel_end_ns - m->launches[0].kernel_start_ns, 60u);
}

TEST(TraceLoader, OddValuesInAValidTraceNeverCrashTheAnalysis) {
  // Bytes changed inside payloads keep a trace readable but give odd values (frees before their
  // allocation, huge sizes and times, unknown ids): loading, analyzing and rendering must cope.
  TempPath path("odd.trace");
  testing::SyntheticShape shape;
  shape.steps = 2;
  ASSERT_TRUE(testing::WriteModelAsTrace(testing::SyntheticTrace(shape), path.path()).ok());
  const std::string bytes = trace::testing::ReadFile(path.path());
  std::mt19937 random(4);
  int loaded = 0;
  for (int i = 0; i < 300; ++i) {
    std::string odd = bytes;
    for (int e = 0; e < 8; ++e) {
      const size_t at = 16 + random() % (odd.size() - 16);
      odd[at] = static_cast<char>(random() % 2 == 0 ? 0xff : random());
    }
    trace::testing::WriteFile(path.path(), odd);
    absl::StatusOr<TraceModel> m = LoadTraceModel(path.path());
    if (!m.ok()) continue;
    ++loaded;
    const Analysis a = Analyze(*m);
    EXPECT_FALSE(RenderHtmlReport(*m, a).empty());
  }
  EXPECT_GT(loaded, 10);
}

TEST(TraceLoader, TruncatedTraceIsAnErrorNamingTheFile) {
  TempPath path("cut.trace");
  ASSERT_TRUE(testing::WriteModelAsTrace(testing::SyntheticTrace(), path.path()).ok());
  const std::string bytes = trace::testing::ReadFile(path.path());
  trace::testing::WriteFile(path.path(), bytes.substr(0, bytes.size() / 2));
  absl::StatusOr<TraceModel> m = LoadTraceModel(path.path());
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StartsWith(m.status().message(), path.path() + ": truncated trace at byte "))
      << m.status();
}

}  // namespace
}  // namespace spillway::report
