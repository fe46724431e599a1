// Record mode end to end on simgpu (interpose/recorder.h): a recorded workload's trace, read back
// with the trace reader, agrees with the exit summary and with simgpu's own stats; call-site ids
// are the same in two runs of the same program; a trace that cannot be written costs the job
// nothing but one log line; a forked child writes its own trace.
#include <cuda.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/trace/trace_reader.h"
#include "tests/integration/subprocess.h"

namespace spillway::testing {
namespace {

const std::string kOut = SPILLWAY_TEST_OUT_DIR;

std::string TempDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/record_" + name + "." + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

// What a test needs from a trace, copied out of the reader's views.
struct Trace {
  std::string device_name;
  std::string cuda_version;
  std::string driver_version;
  std::string spillway_version;
  uint64_t device_memory = 0;
  uint32_t pid = 0;
  std::vector<trace::AllocRecord> allocs;
  std::vector<trace::FreeRecord> frees;
  std::vector<trace::LaunchRecord> launches;  // accesses not kept (views)
  std::vector<std::vector<trace::AccessRecord>> accesses;
  std::vector<trace::KernelTimeRecord> kernel_times;
  std::map<uint32_t, std::string> strings;
  std::map<uint32_t, std::string> module_paths;
  std::map<uint64_t, std::vector<trace::Frame>> sites;
  uint64_t memcpys = 0;
  uint64_t memsets = 0;
  uint64_t syncs = 0;
  std::vector<std::string> module_loads;
  uint64_t dropped = 0;
  std::vector<std::string> problems;  // uses before definitions
};

Trace Load(const std::string& path) {
  Trace out;
  absl::StatusOr<std::unique_ptr<trace::TraceReader>> reader = trace::TraceReader::Open(path);
  if (!reader.ok()) {
    ADD_FAILURE() << reader.status();
    return out;
  }
  const trace::HeaderRecord& header = (*reader)->header();
  out.device_name = std::string(header.device_name);
  out.cuda_version = std::string(header.cuda_version);
  out.driver_version = std::string(header.driver_version);
  out.spillway_version = std::string(header.spillway_version);
  out.device_memory = header.device_memory_bytes;
  out.pid = header.pid;
  trace::Record record;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) {
      ADD_FAILURE() << more.status();
      break;
    }
    if (!*more) break;
    if (const auto* s = std::get_if<trace::StringRecord>(&record)) {
      out.strings[s->id] = std::string(s->text);
    } else if (const auto* m = std::get_if<trace::ModuleRecord>(&record)) {
      out.module_paths[m->id] = std::string(m->path);
    } else if (const auto* c = std::get_if<trace::CallSiteRecord>(&record)) {
      for (const trace::Frame& frame : c->frames) {
        if (frame.module != 0 && !out.module_paths.contains(frame.module)) {
          out.problems.push_back("frame of an undefined module");
        }
      }
      out.sites[c->id] = std::vector<trace::Frame>(c->frames.begin(), c->frames.end());
    } else if (const auto* a = std::get_if<trace::AllocRecord>(&record)) {
      if (a->call_site != 0 && !out.sites.contains(a->call_site)) {
        out.problems.push_back("alloc with an undefined call site");
      }
      out.allocs.push_back(*a);
    } else if (const auto* f = std::get_if<trace::FreeRecord>(&record)) {
      out.frees.push_back(*f);
    } else if (const auto* l = std::get_if<trace::LaunchRecord>(&record)) {
      out.launches.push_back(*l);
      out.launches.back().accesses = {};
      out.accesses.emplace_back(l->accesses.begin(), l->accesses.end());
      if (l->function_name != 0 && !out.strings.contains(l->function_name)) {
        out.problems.push_back("launch with an undefined function name");
      }
    } else if (const auto* k = std::get_if<trace::KernelTimeRecord>(&record)) {
      out.kernel_times.push_back(*k);
    } else if (std::holds_alternative<trace::MemcpyRecord>(record)) {
      ++out.memcpys;
    } else if (std::holds_alternative<trace::MemsetRecord>(record)) {
      ++out.memsets;
    } else if (std::holds_alternative<trace::SynchronizeRecord>(record)) {
      ++out.syncs;
    } else if (const auto* load = std::get_if<trace::ModuleLoadRecord>(&record)) {
      out.module_loads.emplace_back(load->name);
    }
  }
  out.dropped = (*reader)->end().records_dropped;
  return out;
}

// The largest sum of live bytes over the trace's allocs and frees, in time order.
uint64_t PeakLiveBytes(const Trace& trace) {
  std::vector<std::pair<uint64_t, int64_t>> events;  // (time, +bytes / -bytes)
  std::map<uint64_t, uint64_t> sizes;
  for (const trace::AllocRecord& a : trace.allocs) {
    events.emplace_back(a.time_ns, static_cast<int64_t>(a.bytes));
    sizes[a.allocation_id] = a.bytes;
  }
  for (const trace::FreeRecord& f : trace.frees) {
    events.emplace_back(f.time_ns, -static_cast<int64_t>(sizes[f.allocation_id]));
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t live = 0;
  int64_t peak = 0;
  for (const auto& [time, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return static_cast<uint64_t>(peak);
}

std::map<std::string, std::string> RecordEnv(const std::string& trace_path) {
  return {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
          {"SIMGPU_MEMORY", "64MiB"},
          {"LD_PRELOAD", kOut + "/libspillway.so"},
          {"SPILLWAY_MODE", "record"},
          {"SPILLWAY_TRACE", trace_path}};
}

const std::vector<std::string> kDemo = {
    kOut + "/oversubscribe", "--factor", "0.75", "--buffer", "4MiB", "--passes", "2"};

TEST(Record, TraceAgreesWithTheSummaryAndSimgpu) {
  const std::string dir = TempDir("agree");
  std::map<std::string, std::string> env = RecordEnv(dir + "/run.trace");
  env["SPILLWAY_SUMMARY"] = dir + "/summary.json";
  env["SIMGPU_STATS"] = dir + "/stats.json";
  const ProcessResult run = RunProcess(kDemo, env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("matches the host's"), std::string::npos) << run.output;
  const std::string summary = ReadFile(dir + "/summary.json");
  const std::string stats = ReadFile(dir + "/stats.json");
  ASSERT_FALSE(summary.empty());
  ASSERT_FALSE(stats.empty());
  EXPECT_NE(summary.find("\"mode\":\"record\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"errors\":[]"), std::string::npos) << summary;

  const Trace trace = Load(dir + "/run.trace");
  EXPECT_TRUE(trace.problems.empty()) << trace.problems.front();
  EXPECT_EQ(trace.device_name.rfind("simgpu", 0), 0u) << trace.device_name;
  // cuDriverGetVersion (simgpu answers the CUDA_VERSION it was built with) as "major.minor".
  EXPECT_EQ(trace.cuda_version,
            std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10));
  EXPECT_EQ(trace.driver_version, "simgpu");
  EXPECT_FALSE(trace.spillway_version.empty());
  EXPECT_EQ(trace.device_memory, 64u << 20);
  EXPECT_EQ(trace.dropped, 0u);

  // Allocations: 12 buffers of 4 MiB and the 8-byte checksum, all freed, as the summary says.
  EXPECT_EQ(static_cast<long long>(trace.allocs.size()), JsonInt(summary, "count")) << summary;
  EXPECT_EQ(trace.allocs.size(), 13u);
  EXPECT_EQ(trace.frees.size(), trace.allocs.size());
  EXPECT_EQ(static_cast<long long>(PeakLiveBytes(trace)), JsonInt(summary, "bytes_peak"));
  EXPECT_EQ(static_cast<long long>(PeakLiveBytes(trace)),
            JsonInt(stats, "managed_alloc_bytes_peak"))
      << stats;
  std::set<uint64_t> ids;
  std::map<uint64_t, uint64_t> bytes_of;
  for (const trace::AllocRecord& a : trace.allocs) bytes_of[a.allocation_id] = a.bytes;
  for (const trace::AllocRecord& a : trace.allocs) {
    EXPECT_EQ(a.kind, trace::AllocKind::kManaged);  // run mode's backing
    EXPECT_NE(a.call_site, 0u);
    ids.insert(a.allocation_id);
  }
  EXPECT_EQ(ids.size(), trace.allocs.size());
  for (const trace::FreeRecord& f : trace.frees) EXPECT_TRUE(ids.contains(f.allocation_id));

  // Launches: as many as simgpu ran, each with its buffer(s) in the access set and a name.
  EXPECT_EQ(static_cast<long long>(trace.launches.size()), JsonInt(stats, "kernels_launched"));
  EXPECT_EQ(static_cast<long long>(trace.launches.size()), JsonInt(summary, "launches"));
  for (size_t i = 0; i < trace.launches.size(); ++i) {
    EXPECT_FALSE(trace.accesses[i].empty()) << "launch " << i;
    for (const trace::AccessRecord& access : trace.accesses[i]) {
      EXPECT_TRUE(ids.contains(access.allocation_id));
      // The demo passes each buffer's base address: from offset 0 to the end.
      EXPECT_EQ(access.offset, 0u);
      EXPECT_EQ(access.bytes, bytes_of[access.allocation_id]);
    }
    EXPECT_FALSE(trace.strings.at(trace.launches[i].function_name).empty());
    EXPECT_EQ(trace.launches[i].grid[0], 1024u);
  }
  EXPECT_EQ(trace.memcpys, 1u);
  EXPECT_EQ(trace.memsets, 1u);
  EXPECT_GE(trace.syncs, 1u);
  // The demo's kernels come from one cuModuleLoad of its kernel library.
  ASSERT_EQ(trace.module_loads.size(), 1u);
  EXPECT_NE(trace.module_loads[0].find("demo_kernels"), std::string::npos) << trace.module_loads[0];

  // Kernel times from events, read at the final synchronization: one per launch.
  std::set<uint64_t> correlations;
  for (const trace::LaunchRecord& l : trace.launches) correlations.insert(l.correlation_id);
  EXPECT_EQ(trace.kernel_times.size(), trace.launches.size());
  for (const trace::KernelTimeRecord& k : trace.kernel_times) {
    EXPECT_TRUE(correlations.contains(k.correlation_id));
    EXPECT_LE(k.start_ns, k.end_ns);
    EXPECT_EQ(k.source, trace::KernelTimeRecord::kEvents);
  }

  // Call sites: the buffers' loop and the checksum are two sites; the innermost frame of each is
  // in the job's own executable (the shim's frames are skipped).
  std::set<uint64_t> sites;
  for (const trace::AllocRecord& a : trace.allocs) sites.insert(a.call_site);
  EXPECT_EQ(sites.size(), 2u);
  for (const uint64_t site : sites) {
    const std::vector<trace::Frame>& frames = trace.sites.at(site);
    ASSERT_FALSE(frames.empty());
    const std::string& innermost = trace.module_paths.at(frames[0].module);
    EXPECT_NE(innermost.find("oversubscribe"), std::string::npos) << innermost;
  }
}

TEST(Record, AccessStartsAtThePointerTheKernelGot) {
  const std::string dir = TempDir("interior");
  const std::string path = dir + "/run.trace";
  const ProcessResult run =
      RunProcess({kOut + "/record_interior_program", KERNEL_LIBRARY}, RecordEnv(path));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Trace trace = Load(path);
  ASSERT_EQ(trace.allocs.size(), 1u);
  ASSERT_EQ(trace.launches.size(), 1u);
  ASSERT_EQ(trace.accesses[0].size(), 1u);
  const trace::AccessRecord& access = trace.accesses[0][0];
  EXPECT_EQ(access.allocation_id, trace.allocs[0].allocation_id);
  EXPECT_EQ(access.offset, 4096u);
  EXPECT_EQ(access.bytes, (64u << 10) - 4096u);
  EXPECT_EQ(trace.strings.at(trace.launches[0].function_name), "store");
}

// Events are read at synchronizations; a launch after the last one is read at exit.
// Kernel times are the kernels' own: the start event goes on the stream after the engine's waits
// for its prefetches, right before the kernel. train_like oversubscribed twice on three streams:
// every forward kernel costs the same on simgpu (equal tensors) unless it demand-faults (a chunk
// the engine did not bring in: 1-4 in a run, depending on the host's timing), so all but at most
// as many forward kernels as the run had demand faults are recorded within 5% of the shortest.
// With the start event recorded before the engine's waits, forward kernels that waited for a
// prefetch batch were recorded up to 4x longer. (simgpu has room beyond the budget, as a GPU has
// beyond SPILLWAY_DEVICE_MEMORY: with none, it evicts by itself now and then and the faults
// follow.)
TEST(Record, KernelTimesLeaveOutTheEnginesWaits) {
  const std::string dir = TempDir("train_like");
  const std::string path = dir + "/run.trace";
  std::map<std::string, std::string> env = RecordEnv(path);
  env["SPILLWAY_DEVICE_MEMORY"] = "64MiB";
  env["SIMGPU_MEMORY"] = "72MiB";
  env["SIMGPU_STATS"] = dir + "/stats.json";
  const ProcessResult run = RunProcess({kOut + "/train_like", "--oversubscription", "2", "--layers",
                                        "24", "--steps", "4", "--streams", "3"},
                                       env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Trace trace = Load(path);
  std::map<uint64_t, uint64_t> forward;  // correlation id -> recorded ns
  for (const trace::LaunchRecord& l : trace.launches) {
    const auto name = trace.strings.find(l.function_name);
    if (name != trace.strings.end() && name->second == "tl_forward") forward[l.correlation_id] = 0;
  }
  for (const trace::KernelTimeRecord& k : trace.kernel_times) {
    if (auto it = forward.find(k.correlation_id); it != forward.end()) {
      it->second = k.end_ns - k.start_ns;
    }
  }
  ASSERT_EQ(forward.size(), 96u);
  uint64_t shortest = UINT64_MAX;
  for (const auto& [id, ns] : forward) {
    ASSERT_GT(ns, 0u) << "forward launch " << id << " has no kernel time";
    shortest = std::min(shortest, ns);
  }
  const long long faults = JsonInt(ReadFile(dir + "/stats.json"), "count", "demand_faults");
  ASSERT_GE(faults, 0);
  std::string longer;
  long long count = 0;
  for (const auto& [id, ns] : forward) {
    if (ns <= shortest + shortest / 20) continue;
    ++count;
    longer += " launch " + std::to_string(id) + ": " + std::to_string(ns) + " ns;";
  }
  EXPECT_LE(count, faults) << "forward kernels longer than the shortest (" << shortest
                           << " ns) by over 5%:" << longer;
}

TEST(Record, LaunchAfterTheLastSynchronizationIsTimedAtExit) {
  const std::string dir = TempDir("unsynced");
  const std::string path = dir + "/run.trace";
  const ProcessResult run = RunProcess(
      {kOut + "/record_interior_program", KERNEL_LIBRARY, "--launch-at-exit"}, RecordEnv(path));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Trace trace = Load(path);
  ASSERT_EQ(trace.launches.size(), 2u);
  ASSERT_EQ(trace.kernel_times.size(), 2u);
  std::set<uint64_t> timed;
  for (const trace::KernelTimeRecord& k : trace.kernel_times) {
    timed.insert(k.correlation_id);
    EXPECT_LE(k.start_ns, k.end_ns);
    EXPECT_EQ(k.source, trace::KernelTimeRecord::kEvents);
  }
  for (const trace::LaunchRecord& l : trace.launches) EXPECT_TRUE(timed.contains(l.correlation_id));
}

// CUDA 13's cudart synchronizes a device through cuCtxSynchronize_v2 (cuGetProcAddress at 13000):
// recorded as cuCtxSynchronize is, and its launch timed there rather than at exit.
TEST(Record, ContextSynchronizeV2IsRecorded) {
  for (const bool v2 : {false, true}) {
    const std::string dir = TempDir(v2 ? "sync_v2" : "sync_v1");
    const std::string path = dir + "/run.trace";
    std::vector<std::string> argv = {kOut + "/record_interior_program", KERNEL_LIBRARY};
    if (v2) argv.push_back("--sync-v2");
    const ProcessResult run = RunProcess(argv, RecordEnv(path));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const Trace trace = Load(path);
    EXPECT_EQ(trace.syncs, 1u) << (v2 ? "cuCtxSynchronize_v2" : "cuCtxSynchronize");
    EXPECT_EQ(trace.kernel_times.size(), 1u);
  }
}

// A driver before CUDA 12.8 has cuEventElapsedTime only at its first version (same signature):
// the kernels are timed there too.
TEST(Record, KernelsAreTimedOnADriverBeforeCuda12_8) {
  const std::string dir = TempDir("driver_12_4");
  const std::string path = dir + "/run.trace";
  std::map<std::string, std::string> env = RecordEnv(path);
  env["SIMGPU_DRIVER_VERSION"] = "12040";
  const ProcessResult run =
      RunProcess({kOut + "/record_interior_program", KERNEL_LIBRARY, "--launch-at-exit"}, env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Trace trace = Load(path);
  ASSERT_EQ(trace.launches.size(), 2u);
  EXPECT_EQ(trace.kernel_times.size(), 2u);
}

TEST(Record, CallSiteIdsAreTheSameInTwoRuns) {
  const std::string dir = TempDir("stable");
  std::vector<std::vector<uint64_t>> runs;
  for (int run = 0; run < 2; ++run) {
    const std::string path = dir + "/run" + std::to_string(run) + ".trace";
    const ProcessResult result = RunProcess(kDemo, RecordEnv(path));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const Trace trace = Load(path);
    std::vector<uint64_t> sites;
    for (const trace::AllocRecord& a : trace.allocs) sites.push_back(a.call_site);
    runs.push_back(sites);
  }
  ASSERT_EQ(runs[0].size(), 13u);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(std::count(runs[0].begin(), runs[0].end(), uint64_t{0}), 0);
}

TEST(Record, UnwritableTraceCostsOneLineAndTheJobRuns) {
  const std::string dir = TempDir("unwritable");
  std::map<std::string, std::string> env = RecordEnv("/nonexistent-spillway-dir/run.trace");
  env["SPILLWAY_SUMMARY"] = dir + "/summary.json";
  const ProcessResult run = RunProcess(kDemo, env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("matches the host's"), std::string::npos) << run.output;
  size_t lines = 0;
  for (size_t at = run.output.find("SPILLWAY_TRACE"); at != std::string::npos;
       at = run.output.find("SPILLWAY_TRACE", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << run.output;
  EXPECT_NE(run.output.find("/nonexistent-spillway-dir/run.trace"), std::string::npos);
  // The engine still ran (as in run mode) and the summary says what happened.
  const std::string summary = ReadFile(dir + "/summary.json");
  EXPECT_GT(JsonInt(summary, "prefetch_bytes"), 0) << summary;
  EXPECT_NE(summary.find("SPILLWAY_TRACE"), std::string::npos) << summary;
}

// Two jobs recording at once to one SPILLWAY_TRACE (no %p): one keeps the path, the other records
// beside it (PATH.<pid>) with one warning line; both traces are whole (the file was once truncated
// and written by both, and read as corrupt).
TEST(Record, TwoProcessesOnOneTracePathEachWriteAWholeTrace) {
  const std::string dir = TempDir("shared_path");
  const std::string path = dir + "/job.trace";
  std::map<std::string, std::string> env = RecordEnv(path);
  env["SIMGPU_HOLD_KERNEL_US"] = "20000";  // each kernel holds 20 ms: the two runs overlap
  ProcessResult runs[2];
  std::thread other([&] { runs[1] = RunProcess(kDemo, env); });
  runs[0] = RunProcess(kDemo, env);
  other.join();
  int moved = -1;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(runs[i].exit_code, 0) << runs[i].output;
    if (runs[i].output.find("another process is recording to '" + path + "'") !=
        std::string::npos) {
      EXPECT_EQ(moved, -1) << "both moved aside";
      moved = i;
    }
  }
  ASSERT_NE(moved, -1) << "neither run saw the other (did they overlap?)\n"
                       << runs[0].output << runs[1].output;
  const std::string& line = runs[moved].output;
  const size_t at = line.find("records to '" + path + ".");
  ASSERT_NE(at, std::string::npos) << line;
  const size_t start = at + std::string("records to '").size();
  const std::string aside = line.substr(start, line.find('\'', start) - start);
  for (const std::string& p : {path, aside}) {
    const Trace t = Load(p);
    EXPECT_TRUE(t.problems.empty()) << p << ": " << t.problems.front();
    EXPECT_FALSE(t.allocs.empty()) << p;
  }
}

TEST(Record, ForkedChildWritesItsOwnTrace) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer cannot follow a child that starts threads after a fork of a "
                  "process with threads (the recording child does)";
#endif
  const std::string dir = TempDir("fork");
  const std::string path = dir + "/job.trace";
  std::map<std::string, std::string> env = RecordEnv(path);
  // Under ASan: the child exits holding objects the parent made (the run-mode engine it dropped).
  const char* asan = std::getenv("ASAN_OPTIONS");
  env["ASAN_OPTIONS"] = std::string(asan != nullptr ? asan : "") + ":detect_leaks=0";
  const ProcessResult run = RunProcess({kOut + "/record_fork_program"}, env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const size_t at = run.output.find("child ");
  ASSERT_NE(at, std::string::npos) << run.output;
  const long child = std::strtol(run.output.c_str() + at + 6, nullptr, 10);

  const Trace parent = Load(path);
  EXPECT_EQ(parent.allocs.size(), 1u);  // only the parent's own allocation
  EXPECT_EQ(parent.frees.size(), 1u);
  EXPECT_NE(parent.pid, static_cast<uint32_t>(child));

  const Trace forked = Load(path + "." + std::to_string(child));
  EXPECT_EQ(forked.pid, static_cast<uint32_t>(child));
  ASSERT_EQ(forked.allocs.size(), 2u);
  EXPECT_EQ(forked.allocs[0].bytes, 2u << 20);
  EXPECT_EQ(forked.allocs[1].bytes, 3u << 20);
  EXPECT_TRUE(forked.frees.empty());
  // The child's trace defines its own call sites and modules.
  EXPECT_TRUE(forked.problems.empty()) << forked.problems.front();
  for (const trace::AllocRecord& a : forked.allocs) EXPECT_TRUE(forked.sites.contains(a.call_site));
}

}  // namespace
}  // namespace spillway::testing
