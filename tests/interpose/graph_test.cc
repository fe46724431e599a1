// Access sets for CUDA graph launches, end to end on simgpu (graph_program.cc under the preload):
// three captured graphs of three kernels each over managed buffers allocated before capture, 48
// MiB in all on a 32 MiB device, launched in turn. The results equal an unconstrained run; with
// graph access sets the engine prefetches each graph's buffers before its launch and the kernels
// demand-fault less than with SPILLWAY_GRAPH_ACCESS=0, also when each graph is nested in a
// child-graph node of another; an exec whose parameters changed gets none.
// Record mode writes each graph launch with its access set and its time.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/trace/trace_reader.h"
#include "tests/integration/subprocess.h"

namespace spillway::testing {
namespace {

struct Outcome {
  int status = -1;
  std::string output;
  std::string summary;
  std::string stats;
};

// The text after "checksum=" up to the end of its line, or "".
std::string Checksum(const std::string& output) {
  const size_t at = output.find("checksum=");
  if (at == std::string::npos) return "";
  return output.substr(at + 9, output.find('\n', at) - at - 9);
}

// Runs graph_program in `mode` on a simgpu device of `device_mib`; under the shim (budget 32 MiB)
// unless `shim` is false.
Outcome RunJob(const std::string& mode, std::map<std::string, std::string> env, bool shim = true,
               const std::string& device_mib = "32MiB") {
  const std::string base = ::testing::TempDir() + "graph_" + std::to_string(::getpid()) + "_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                           mode;
  const std::string summary = base + ".json";
  const std::string stats = base + ".stats.json";
  std::remove(summary.c_str());
  std::remove(stats.c_str());
  env["LD_LIBRARY_PATH"] = SIMGPU_DIR;
  env["SIMGPU_MEMORY"] = device_mib;
  env["SIMGPU_STATS"] = stats;
  if (shim) {
    const char* runner = std::getenv("SPILLWAY_TEST_PRELOAD");  // sanitizer runtimes
    env["LD_PRELOAD"] = runner != nullptr && *runner != '\0'
                            ? std::string(runner) + ":" + SPILLWAY_LIB
                            : std::string(SPILLWAY_LIB);
    env["SPILLWAY_SUMMARY"] = summary;
    env["SPILLWAY_DEVICE_MEMORY"] = "32MiB";
  }
  // 3 graphs of 3 kernels over 4 buffers of 4 MiB each, 4 rounds.
  const ProcessResult process =
      RunProcess({GRAPH_PROGRAM, KERNEL_LIBRARY, mode, "3", "3", "4", "4"}, env);
  Outcome run{process.exit_code, process.output, ReadFile(summary), ReadFile(stats)};
  std::remove(summary.c_str());
  std::remove(stats.c_str());
  return run;
}

long long Faults(const Outcome& run) { return JsonInt(run.stats, "count"); }  // demand_faults

// Runs graph_program in `mode`, whose execs change after instantiation through `setter`: the
// results are `reference`'s, and the launches get no access set (one log line says why).
void ExpectStaleExecs(const std::string& mode, const std::string& setter,
                      const Outcome& reference) {
  const Outcome stale = RunJob(mode, {{"SPILLWAY_LOG", "info"}});
  ASSERT_EQ(stale.status, 0) << stale.output;
  EXPECT_EQ(Checksum(stale.output), Checksum(reference.output));
  EXPECT_EQ(JsonInt(stale.summary, "prefetch_bytes"), 0) << stale.summary;
  EXPECT_NE(stale.output.find("changed by " + setter), std::string::npos) << stale.output;
}

TEST(GraphTest, GraphLaunchesGetAccessSetsAndFaultLess) {
  const Outcome reference = RunJob("direct", {}, /*shim=*/false, "256MiB");
  ASSERT_EQ(reference.status, 0) << reference.output;
  const std::string expected = Checksum(reference.output);
  ASSERT_FALSE(expected.empty()) << reference.output;

  // simgpu's graphs compute what direct launches compute, unconstrained or oversubscribed.
  const Outcome plain = RunJob("graph", {}, /*shim=*/false);
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(Checksum(plain.output), expected);

  const Outcome without = RunJob("graph", {{"SPILLWAY_GRAPH_ACCESS", "0"}});
  ASSERT_EQ(without.status, 0) << without.output;
  EXPECT_EQ(Checksum(without.output), expected);
  EXPECT_EQ(JsonInt(without.summary, "prefetch_bytes"), 0) << without.summary;

  const Outcome with = RunJob("graph", {});
  ASSERT_EQ(with.status, 0) << with.output;
  EXPECT_EQ(Checksum(with.output), expected);
  const std::string& s = with.summary;
  ASSERT_FALSE(s.empty()) << with.output;
  EXPECT_EQ(JsonInt(s, "cuGraphLaunch"), 12) << s;
  EXPECT_EQ(JsonInt(s, "cuGraphInstantiateWithFlags"), 3) << s;
  EXPECT_GT(JsonInt(s, "prefetch_bytes"), 0) << s;
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
  EXPECT_GT(JsonInt(with.stats, "prefetched_bytes"), 0) << with.stats;
  EXPECT_LE(JsonInt(with.stats, "peak_resident_bytes"), 32ll << 20) << with.stats;
  // Each graph's 16 MiB is brought in before its launch instead of faulting in under the kernels.
  EXPECT_LT(Faults(with) * 2, Faults(without)) << with.stats << "\n" << without.stats;
  std::printf("demand faults: %lld without graph access sets, %lld with; prefetched %lld bytes\n",
              Faults(without), Faults(with), JsonInt(with.stats, "prefetched_bytes"));
}

// The chains captured, then each embedded in a child-graph node of another graph: the access set
// of the outer graph's launch holds the child's kernels' buffers.
TEST(GraphTest, ChildGraphsKernelsAreInTheAccessSet) {
  const Outcome reference = RunJob("direct", {}, /*shim=*/false, "256MiB");
  ASSERT_EQ(reference.status, 0) << reference.output;
  const Outcome without = RunJob("child", {{"SPILLWAY_GRAPH_ACCESS", "0"}});
  ASSERT_EQ(without.status, 0) << without.output;
  EXPECT_EQ(Checksum(without.output), Checksum(reference.output));

  const Outcome with = RunJob("child", {});
  ASSERT_EQ(with.status, 0) << with.output;
  EXPECT_EQ(Checksum(with.output), Checksum(reference.output));
  const std::string& s = with.summary;
  EXPECT_EQ(JsonInt(s, "cuGraphLaunch"), 12) << s;
  EXPECT_GT(JsonInt(s, "prefetch_bytes"), 0) << s;
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
  EXPECT_LT(Faults(with) * 2, Faults(without)) << with.stats << "\n" << without.stats;

  // New parameters for a child graph: the exec's access set is no longer known.
  ExpectStaleExecs("childset", "cuGraphExecChildGraphNodeSetParams", reference);
}

TEST(GraphTest, ChangedExecsGetNoAccessSetUntilUpdated) {
  const Outcome reference = RunJob("direct", {}, /*shim=*/false, "256MiB");
  ASSERT_EQ(reference.status, 0) << reference.output;

  ExpectStaleExecs("setparams", "cuGraphExecKernelNodeSetParams_v2", reference);

  const Outcome updated = RunJob("update", {});
  ASSERT_EQ(updated.status, 0) << updated.output;
  EXPECT_EQ(Checksum(updated.output), Checksum(reference.output));
  EXPECT_GT(JsonInt(updated.summary, "prefetch_bytes"), 0) << updated.summary;
}

TEST(GraphTest, HooksFoundThroughCuGetProcAddressWorkToo) {
  const Outcome reference = RunJob("direct", {}, /*shim=*/false, "256MiB");
  ASSERT_EQ(reference.status, 0) << reference.output;
  const Outcome run = RunJob("procaddress", {});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Checksum(run.output), Checksum(reference.output));
  EXPECT_EQ(JsonInt(run.summary, "cuGraphInstantiateWithFlags"), 3) << run.summary;
  EXPECT_GT(JsonInt(run.summary, "prefetch_bytes"), 0) << run.summary;
  EXPECT_LT(Faults(run), 48) << run.stats;  // half of what 96 without access sets would be
}

// A global-mode capture on one thread while another thread launches kernels over more managed
// memory than the budget: the engine's moves for those launches would be "potentially unsafe"
// calls that invalidate the capture (simgpu refuses them as the driver does), so they are skipped
// until the capture ends. The capture succeeds and its graph computes the right result, in run and
// in record mode (whose timing events are skipped too).
TEST(GraphTest, ACaptureInGlobalModeSurvivesAnotherThreadsLaunches) {
  const Outcome reference = RunJob("direct", {}, /*shim=*/false, "256MiB");
  ASSERT_EQ(reference.status, 0) << reference.output;
  const std::string expected = Checksum(reference.output);

  const Outcome plain = RunJob("threaded", {}, /*shim=*/false);
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(Checksum(plain.output), expected);

  const Outcome run = RunJob("threaded", {});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Checksum(run.output), expected);
  EXPECT_GT(JsonInt(run.summary, "capture_skips"), 0) << run.summary;
  EXPECT_GT(JsonInt(run.summary, "prefetch_bytes"), 0) << run.summary;  // after the capture
  EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;

  const std::string trace = ::testing::TempDir() + "graph_threaded_" + std::to_string(::getpid());
  const Outcome recorded =
      RunJob("threaded", {{"SPILLWAY_MODE", "record"}, {"SPILLWAY_TRACE", trace}});
  std::remove(trace.c_str());
  ASSERT_EQ(recorded.status, 0) << recorded.output;
  EXPECT_EQ(Checksum(recorded.output), expected);
  EXPECT_GT(JsonInt(recorded.summary, "capture_skips"), 0) << recorded.summary;
}

// Stream-ordered allocations inside global-mode captures (graph memory nodes, as PyTorch's CUDA
// graphs make with its cudaMallocAsync backend) stay device memory and leave the captures whole;
// with SPILLWAY_BALLAST the engine starts inside the first capture, and the ballast, whose
// cuMemAlloc would invalidate it, waits for the capture's end.
TEST(GraphTest, StreamOrderedAllocationsInACaptureLeaveItWholeBallastOrNot) {
  const Outcome reference = RunJob("direct", {}, /*shim=*/false, "256MiB");
  ASSERT_EQ(reference.status, 0) << reference.output;
  const std::string expected = Checksum(reference.output);
  const Outcome plain = RunJob("scratch", {}, /*shim=*/false, "64MiB");
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(Checksum(plain.output), expected);
  for (const char* ballast : {"0", "1"}) {
    const Outcome run = RunJob("scratch", {{"SPILLWAY_BALLAST", ballast}}, true, "64MiB");
    ASSERT_EQ(run.status, 0) << ballast << "\n" << run.output;
    EXPECT_EQ(Checksum(run.output), expected);
    EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "capture", "device_exceptions"), 3) << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "ballast_bytes") > 0, std::string(ballast) == "1")
        << run.summary;
  }
}

TEST(GraphTest, ABadSettingIsOneLineAndTheDefault) {
  const Outcome run = RunJob("graph", {{"SPILLWAY_GRAPH_ACCESS", "maybe"}});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("SPILLWAY_GRAPH_ACCESS: cannot use 'maybe'"), std::string::npos)
      << run.output;
  EXPECT_GT(JsonInt(run.summary, "prefetch_bytes"), 0) << run.summary;
}

// Record mode (the engine not started: the device holds the job): each graph launch is written
// with what its kernel nodes touch, its group's four buffers, and is timed like a kernel, so
// `spillway plan` can plan around it (a trace of format 1.0 had only the launch).
TEST(GraphTest, RecordModeWritesEachGraphLaunchWithItsAccessSetAndTime) {
  const std::string trace_path =
      ::testing::TempDir() + "graph_" + std::to_string(::getpid()) + "_record.trace";
  const Outcome run = RunJob("graph", {{"SPILLWAY_MODE", "record"}, {"SPILLWAY_TRACE", trace_path}},
                             /*shim=*/true, "256MiB");
  ASSERT_EQ(run.status, 0) << run.output;
  auto reader = trace::TraceReader::Open(trace_path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->minor_version(), trace::kFormatMinor);
  std::vector<uint64_t> allocations;  // in allocation order: group g's buffers are 4g..4g+3
  std::map<uint64_t, std::set<uint64_t>> accessed_by_exec;
  std::set<uint64_t> graph_correlations, timed;
  int graph_launches = 0;
  trace::Record record;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    if (const auto* a = std::get_if<trace::AllocRecord>(&record)) {
      allocations.push_back(a->allocation_id);
    } else if (const auto* g = std::get_if<trace::GraphLaunchRecord>(&record)) {
      ++graph_launches;
      graph_correlations.insert(g->correlation_id);
      std::set<uint64_t> ids;
      for (const trace::AccessRecord& access : g->accesses) ids.insert(access.allocation_id);
      auto [it, first] = accessed_by_exec.try_emplace(g->graph_exec, ids);
      if (!first) {
        EXPECT_EQ(it->second, ids) << "exec " << g->graph_exec;  // the same each time
      }
    } else if (const auto* k = std::get_if<trace::KernelTimeRecord>(&record)) {
      if (k->end_ns > k->start_ns) timed.insert(k->correlation_id);
    }
  }
  std::remove(trace_path.c_str());
  EXPECT_EQ(graph_launches, 12);  // 3 graphs, 4 rounds
  ASSERT_EQ(accessed_by_exec.size(), 3u);
  ASSERT_GE(allocations.size(), 12u);
  std::set<std::set<uint64_t>> groups;
  for (size_t g = 0; g < 3; ++g) {
    groups.insert(std::set<uint64_t>(allocations.begin() + 4 * g, allocations.begin() + 4 * g + 4));
  }
  for (const auto& [exec, ids] : accessed_by_exec) EXPECT_TRUE(groups.contains(ids)) << exec;
  for (const uint64_t correlation : graph_correlations) {
    EXPECT_TRUE(timed.contains(correlation)) << "graph launch " << correlation << " untimed";
  }
}

}  // namespace
}  // namespace spillway::testing
