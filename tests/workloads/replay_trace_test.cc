// The replayer's reading of traces (workloads/replay/replay_trace.h): steps split at context
// synchronizes, the prologue, the peak, accesses made disjoint, kernel times, the comparison of
// steps, and the one-line errors for traces that cannot be replayed.
#include "workloads/replay/replay_trace.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/trace/trace_writer.h"
#include "tests/workloads/replay_test_trace.h"

namespace spillway::replay {
namespace {

using testing::TestTraceOptions;
using testing::TestTracePeakBytes;
using testing::WriteTestTrace;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/replay_trace_test_" + name + "." + std::to_string(::getpid());
}

ReplayTrace Read(const TestTraceOptions& options, const std::string& name) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteTestTrace(path, options).ok());
  absl::StatusOr<ReplayTrace> trace = ReadReplayTrace(path);
  EXPECT_TRUE(trace.ok()) << trace.status();
  std::remove(path.c_str());
  return trace.ok() ? *std::move(trace) : ReplayTrace();
}

// A hand-made trace: `body` writes records after the header.
template <typename Body>
std::string WriteTrace(const std::string& name, Body body) {
  const std::string path = TempPath(name);
  trace::WriterOptions options;
  options.flush = trace::WriterOptions::Flush::kManual;
  auto writer = trace::TraceWriter::Open(path, trace::HeaderRecord{}, options);
  EXPECT_TRUE(writer.ok());
  body(**writer);
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

trace::AllocRecord Alloc(uint64_t id, uint64_t bytes) {
  return {1, 1, trace::AllocKind::kAsync, id << 32, bytes, 1, 0, id};
}

trace::SynchronizeRecord Sync() { return {1, 2, 1, trace::SyncWhat::kContext, 0}; }

TEST(ReplayTrace, StepsEndAtEachContextSynchronize) {
  TestTraceOptions options;
  const ReplayTrace trace = Read(options, "steps");
  ASSERT_EQ(trace.steps.size(), 4u);
  EXPECT_FALSE(trace.first_is_prologue);
  EXPECT_EQ(trace.recorded_steps(), 4);
  EXPECT_TRUE(trace.has_modes);
  EXPECT_EQ(trace.peak_live_bytes, TestTracePeakBytes(options));
  EXPECT_EQ(trace.untimed_launches, 0u);
  EXPECT_EQ(trace.trailing_events, 0u);
  // Steps 2 to 4: two loads, 6 forward, loss and its backward, 12 backward, 6 optimizer ops.
  for (size_t s = 1; s < 4; ++s) {
    EXPECT_EQ(trace.steps[s].launches, 2u + 6 + 2 + 12 + 6) << s;
    EXPECT_EQ(trace.steps[s].time_ns, trace.steps[s].launches * options.op_ns) << s;
  }
  // Step 1 also initializes the weights and makes the optimizer's state.
  EXPECT_EQ(trace.steps[0].launches, 6u + 28 + 6);
}

TEST(ReplayTrace, AStretchWithNoLaunchIsThePrologue) {
  TestTraceOptions options;
  options.prologue_sync = true;
  const ReplayTrace trace = Read(options, "prologue");
  ASSERT_EQ(trace.steps.size(), 5u);
  // The weights' initialization launches, so that stretch is a step; a stretch of allocations
  // alone is not.
  EXPECT_FALSE(trace.first_is_prologue);

  const std::string path = WriteTrace("alloc_only", [](trace::TraceWriter& w) {
    w.Write(Alloc(1, 4096));
    w.Write(Sync());
    trace::AccessRecord access{1, 0, 0};
    trace::LaunchRecord launch;
    launch.accesses = absl::MakeConstSpan(&access, 1);
    w.Write(launch);
    w.Write(Sync());
  });
  absl::StatusOr<ReplayTrace> read = ReadReplayTrace(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->first_is_prologue);
  EXPECT_EQ(read->recorded_steps(), 1);
  EXPECT_EQ(read->untimed_launches, 1u);
  std::remove(path.c_str());
}

TEST(ReplayTrace, ReferencesNameTheStepThatMadeTheAllocation) {
  const ReplayTrace trace = Read(TestTraceOptions(), "refs");
  // Step 2 starts by freeing step 1's gradients (zero_grad), made after its activations.
  const ReplayEvent& first = trace.steps[1].events[0];
  ASSERT_EQ(first.kind, ReplayEvent::Kind::kFree);
  EXPECT_EQ(first.tensor.step, 0u);
  // Step 2's forward reads the weights, made first in step 1 (the trace has no prologue).
  for (const ReplayEvent& e : trace.steps[1].events) {
    if (e.kind != ReplayEvent::Kind::kLaunch || trace.names[e.name] != "forward") continue;
    ASSERT_EQ(e.accesses.size(), 3u);
    EXPECT_EQ(e.accesses[1].tensor.step, 0u);
    EXPECT_LT(e.accesses[1].tensor.index, 6u);
    EXPECT_EQ(e.accesses[1].mode, 1);
    EXPECT_EQ(e.accesses[2].tensor.step, 1u);
    EXPECT_EQ(e.accesses[2].mode, 2);
    break;
  }
}

TEST(ReplayTrace, TheLastTwoStepsMatchAndTheFirstTwoDoNot) {
  const ReplayTrace trace = Read(TestTraceOptions(), "compare");
  EXPECT_EQ(StepDifference(trace, 2, 3), "");
  // Step 2 touches the optimizer state step 1 made (the step before it); step 3 an older one.
  EXPECT_NE(StepDifference(trace, 1, 2), "");
  EXPECT_NE(StepDifference(trace, 0, 1), "");

  TestTraceOptions differs;
  differs.last_step_differs = true;
  const ReplayTrace other = Read(differs, "differs");
  EXPECT_EQ(StepDifference(other, 1, 2).empty(), false);
  EXPECT_EQ(StepDifference(other, 2, 3),
            "one has 70 allocations, frees and launches, the other 71");
}

TEST(ReplayTrace, WithoutModesEveryAccessIsReadWrite) {
  TestTraceOptions options;
  options.modes = false;
  const ReplayTrace trace = Read(options, "nomodes");
  EXPECT_FALSE(trace.has_modes);
  for (const ReplayStep& step : trace.steps) {
    for (const ReplayEvent& e : step.events) {
      for (const ReplayAccess& a : e.accesses) EXPECT_EQ(a.mode, 3);
    }
  }
}

TEST(ReplayTrace, OverlappingAccessesOfOneAllocationAreMadeDisjoint) {
  const std::string path = WriteTrace("overlap", [](trace::TraceWriter& w) {
    w.Write(Alloc(7, 1000));
    w.Write(Alloc(8, 64));
    const trace::AccessRecord accesses[] = {{7, 0, 100}, {8, 0, 0}, {7, 50, 100}, {7, 600, 0}};
    const uint8_t modes[] = {1, 2, 2, 3};
    trace::LaunchRecord launch;
    launch.accesses = accesses;
    launch.access_modes = modes;
    w.Write(launch);
    w.Write(Sync());
  });
  absl::StatusOr<ReplayTrace> trace = ReadReplayTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  const std::vector<ReplayAccess>& got = trace->steps[0].events[2].accesses;
  // Allocation 7 first (first touched first), its pieces in offset order, then 8; bytes 0 is
  // from the offset to the end.
  const std::vector<ReplayAccess> want = {{{0, 0}, 7, 0, 50, 1},
                                          {{0, 0}, 7, 50, 50, 3},
                                          {{0, 0}, 7, 100, 50, 2},
                                          {{0, 0}, 7, 600, 400, 3},
                                          {{0, 1}, 8, 0, 64, 2}};
  EXPECT_EQ(got, want);
  std::remove(path.c_str());
}

TEST(ReplayTrace, ErrorsAreOneLineNamingTheFileAndTheRecord) {
  absl::StatusOr<ReplayTrace> missing = ReadReplayTrace(TempPath("missing"));
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("replay_trace_test_missing"), std::string::npos);

  const std::string no_sync =
      WriteTrace("nosync", [](trace::TraceWriter& w) { w.Write(Alloc(1, 4096)); });
  absl::StatusOr<ReplayTrace> read = ReadReplayTrace(no_sync);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(),
            no_sync +
                ": no context synchronize record, so no training step to replay (the "
                "recorder ends each step with one)");
  std::remove(no_sync.c_str());

  const std::string freed = WriteTrace("freed", [](trace::TraceWriter& w) {
    w.Write(Alloc(1, 4096));
    w.Write(trace::FreeRecord{1, 1, 1ull << 32, 1, 1});
    trace::AccessRecord access{1, 0, 0};
    trace::LaunchRecord launch;
    launch.function_name = w.InternString("relu");
    launch.accesses = absl::MakeConstSpan(&access, 1);
    w.Write(launch);
    w.Write(Sync());
  });
  read = ReadReplayTrace(freed);
  ASSERT_FALSE(read.ok());
  // Records: header 1, string 2 (definitions go straight to the file), alloc 3, free 4, launch 5.
  EXPECT_EQ(read.status().message(),
            freed +
                ": record 5: launch of 'relu' touches allocation 1, which is not live (freed "
                "at record 4)");
  std::remove(freed.c_str());

  const std::string beyond = WriteTrace("beyond", [](trace::TraceWriter& w) {
    w.Write(Alloc(1, 4096));
    trace::AccessRecord access{1, 4000, 100};
    trace::LaunchRecord launch;
    launch.accesses = absl::MakeConstSpan(&access, 1);
    w.Write(launch);
    w.Write(Sync());
  });
  read = ReadReplayTrace(beyond);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("record 3: launch of '' touches 100 bytes at offset 4000 "
                                         "of allocation 1, which has 4096"),
            std::string::npos)
      << read.status();
  std::remove(beyond.c_str());
}

}  // namespace
}  // namespace spillway::replay
