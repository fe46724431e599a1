// The trace recorder (profiler/record/trace_recorder.h) against a fake RecordHost: the trace opens
// on the first event with the host's device in its header, kernel times come from the host's
// events (base, start and end) and are written once the end event has passed, a launch whose end
// was not allowed gets no time, and a trace that cannot be opened is said once and stops
// recording. One process, one recorder: the tests run in order on the recorder's one state.
#include "profiler/record/trace_recorder.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/trace/trace_reader.h"

namespace spillway::record {
namespace {

// Events are numbered from 1; each has the time (ms after the base event) it is "recorded" at.
class FakeHost final : public RecordHost {
 public:
  DeviceFacts AskDevice() override { return {"Fake H100", "12.8", "", 80ull << 30}; }
  int CurrentDevice() override { return 0; }
  const char* FunctionName(void*) override { return "fake_kernel"; }
  bool NamesCacheable() override { return true; }
  void* CreateEvent() override { return reinterpret_cast<void*>(++events_created); }
  bool RecordEvent(void* event, uint64_t stream) override {
    recorded[event] = next_time_ms;
    streams.push_back(stream);
    next_time_ms += 1.5f;
    return true;
  }
  bool EventPending(void* event) override { return pending.count(event) > 0; }
  bool ElapsedMs(float* ms, void* from, void* to) override {
    *ms = recorded.at(to) - recorded.at(from);
    return true;
  }
  void Problem(const std::string& line) override { problems.push_back(line); }
  void Info(const std::string& line) override { infos.push_back(line); }
  void Error(const std::string& line) override { problems.push_back(line); }
  void Opened(trace::TraceWriter*, const std::string& device_name, bool forked_child) override {
    opened.push_back(device_name + (forked_child ? " (child)" : ""));
  }
  void BeforeClose() override { ++closes; }

  uintptr_t events_created = 0;
  float next_time_ms = 0;
  std::map<void*, float> recorded;
  std::map<void*, bool> pending;
  std::vector<uint64_t> streams;
  std::vector<std::string> problems, infos, opened;
  int closes = 0;
};

FakeHost& Host() {
  static FakeHost* host = new FakeHost;
  return *host;
}

std::string Dir() {
  static const std::string dir = [] {
    std::string made = std::filesystem::temp_directory_path() / "trace_recorder_test.XXXXXX";
    return std::string(mkdtemp(made.data()));
  }();
  return dir;
}

std::string Expand(std::string_view pattern, long pid) {
  std::string out(pattern);
  if (const size_t at = out.find("%p"); at != std::string::npos) {
    out.replace(at, 2, std::to_string(pid));
  }
  return out;
}

// The trace's records (their views are not used after) and its header's spillway version.
std::vector<trace::Record> ReadBack(const std::string& path, std::string* version) {
  std::vector<trace::Record> records;
  auto reader = trace::TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return records;
  *version = std::string((*reader)->header().spillway_version);
  trace::Record record;
  while (true) {
    absl::StatusOr<bool> next = (*reader)->Next(&record);
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok() || !*next) break;
    records.push_back(record);
  }
  return records;
}

TEST(TraceRecorder, OpensOnFirstEventTimesKernelsFromTheHostsEventsAndCloses) {
  const std::string pattern = Dir() + "/job.%p.trace";
  Start(&Host(), pattern, "", Expand, "test-version");
  EXPECT_TRUE(Recording());
  EXPECT_TRUE(Host().opened.empty());  // nothing opened before the first event

  RecordAlloc(0x1000, 4096, trace::AllocKind::kAsync, 7, 1);
  ASSERT_EQ(Host().opened, std::vector<std::string>{"Fake H100"});
  const std::string path = Expand(pattern, static_cast<long>(getpid()));
  EXPECT_EQ(Host().infos.at(0), "recording to " + path);

  // A timed launch: the base event on the legacy stream, then start and end on stream 7.
  const uint64_t timed = NextCorrelation();
  ASSERT_TRUE(TimesFromEvents());
  BeginTiming(7, /*base_allowed=*/true);
  EXPECT_TRUE(TimingBegun());
  EXPECT_TRUE(AwaitsStart());
  StartTiming(true);
  EXPECT_FALSE(AwaitsStart());
  EndTiming(timed, /*end_allowed=*/true, 7);
  EndLaunch(timed, LaunchShape{.stream = 7}, {});
  EXPECT_EQ(Host().streams, (std::vector<uint64_t>{0, 7, 7}));

  // A launch whose end the host did not allow: its events go back, no time.
  const uint64_t untimed = NextCorrelation();
  BeginTiming(7, true);
  StartTiming(true);
  EndTiming(untimed, /*end_allowed=*/false, 7);
  EXPECT_FALSE(TimingBegun());

  // The timed launch's end has not passed yet: nothing written; then it has.
  void* timed_end = reinterpret_cast<void*>(3);
  Host().pending[timed_end] = true;
  CollectTimes();
  Host().pending.clear();
  EXPECT_TRUE(RecordSynchronize(trace::SyncWhat::kContext, 0, trace::TraceClockNs()));
  CollectTimes();

  CloseAtExit();
  EXPECT_FALSE(Recording());
  EXPECT_EQ(Host().closes, 1);
  EXPECT_TRUE(Host().problems.empty()) << Host().problems.at(0);

  std::string version;
  const std::vector<trace::Record> records = ReadBack(path, &version);
  EXPECT_EQ(version, "test-version");
  int allocs = 0, launches = 0, syncs = 0;
  std::vector<trace::KernelTimeRecord> times;
  for (const trace::Record& record : records) {
    if (std::holds_alternative<trace::AllocRecord>(record)) ++allocs;
    if (std::holds_alternative<trace::LaunchRecord>(record)) ++launches;
    if (std::holds_alternative<trace::SynchronizeRecord>(record)) ++syncs;
    if (const auto* time = std::get_if<trace::KernelTimeRecord>(&record)) times.push_back(*time);
  }
  EXPECT_EQ(allocs, 1);
  EXPECT_EQ(launches, 1);
  EXPECT_EQ(syncs, 1);
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times[0].correlation_id, timed);
  EXPECT_EQ(times[0].stream, 7u);
  // Start 1.5 ms and end 3 ms after the base event: 1.5 ms apart, from the events alone.
  EXPECT_EQ(times[0].end_ns - times[0].start_ns, 1500000u);
  EXPECT_EQ(times[0].source, trace::KernelTimeRecord::kEvents);
}

}  // namespace
}  // namespace spillway::record
