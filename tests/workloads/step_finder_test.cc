// The step finder (policy/planner/trace_workload.h, what `spillway plan`, `simulate`, `inspect` and
// `report` use) on every recorded real model in workloads/traces/: the step it finds is the
// training step the recorder marked (a context synchronize ends each), never a layer within it.
#include <algorithm>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "policy/planner/trace_workload.h"
#include "profiler/trace/trace_reader.h"

namespace spillway::policy {
namespace {

// Allocations, frees and launches in each step the recorder marked.
std::vector<uint64_t> MarkedSteps(const std::string& path) {
  auto reader = trace::TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  std::vector<uint64_t> steps;
  uint64_t events = 0;
  trace::Record record;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    if (std::holds_alternative<trace::AllocRecord>(record) ||
        std::holds_alternative<trace::FreeRecord>(record) ||
        std::holds_alternative<trace::LaunchRecord>(record)) {
      ++events;
    } else if (std::holds_alternative<trace::SynchronizeRecord>(record)) {
      steps.push_back(events);
      events = 0;
    }
  }
  return steps;
}

std::vector<std::string> RecordedTraces() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(SPILLWAY_TRACES_DIR)) {
    if (absl::EndsWith(entry.path().string(), ".trace.gz")) out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(StepFinder, FindsTheWholeTrainingStepOfEveryRecordedModel) {
  const std::vector<std::string> traces = RecordedTraces();
  ASSERT_GE(traces.size(), 8u) << "the recorded models are missing from " << SPILLWAY_TRACES_DIR;
  for (const std::string& path : traces) {
    SCOPED_TRACE(path);
    const std::vector<uint64_t> marked = MarkedSteps(path);
    ASSERT_GE(marked.size(), 3u);
    TraceStepPlace place;
    absl::StatusOr<Workload> w = WorkloadFromTrace(path, nullptr, &place);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(place.events_per_step, marked.back());
    EXPECT_GE(place.steps, 2u);
  }
}

}  // namespace
}  // namespace spillway::policy
