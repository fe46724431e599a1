// Trace -> workload: a trace written with the trace writer for a known training job (weights
// filled at init, three identical steps, frees at exit) reads back as that job's step: the same
// persistent allocations, events, chunk accesses, kernel names and compute times, so the same
// fingerprint and step signature (a policy planned from the trace is one the engine follows).
// Pointers into an arena end at the next offset seen, and on such a trace the simulator's bounds
// stay below every policy's row. A trace without a repeating step is one clear error naming the
// file.
#include "policy/planner/trace_workload.h"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "policy/engine/eviction_policy.h"
#include "policy/plan/step_signature.h"
#include "policy/planner/planner.h"
#include "policy/planner/simulator.h"
#include "profiler/trace/trace_reader.h"
#include "profiler/trace/trace_writer.h"

namespace spillway::policy {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// Writes a job to a trace: `layers` weights (4 MiB each, launches touch their second chunk
// through an interior pointer), then `steps` steps of: input, forward per layer, backward per
// layer freeing activations; then everything freed.
class TraceJob {
 public:
  TraceJob(const std::string& path, int layers) : layers_(layers) {
    trace::HeaderRecord header;
    header.job = "trace_workload_test";
    writer_ = *trace::TraceWriter::Open(
        path, header, trace::WriterOptions{.flush = trace::WriterOptions::Flush::kManual});
    fwd_ = writer_->InternString("forward");
    bwd_ = writer_->InternString("backward");
  }
  void Init() {
    for (int l = 0; l < layers_; ++l) weights_.push_back(Alloc(4 * kMiB));
  }
  // One step over the first `layers` layers (all by default).
  void Step(int layers = -1) {
    if (layers < 0) layers = layers_;
    std::vector<uint64_t> act = {Alloc(2 * kMiB)};
    for (int l = 0; l < layers; ++l) {
      act.push_back(Alloc(2 * kMiB));
      Launch(fwd_, 2e-4, {{act[l], 0, 0}, {weights_[l], 2 * kMiB, 4096}, {act[l + 1], 0, 0}});
    }
    for (int l = layers; l-- > 0;) {
      Launch(bwd_, 4e-4, {{act[l + 1], 0, 0}, {weights_[l], 0, 0}});
      Free(act[l + 1]);
    }
    Free(act[0]);
  }
  // One step whose backward is one CUDA graph (exec 0x9a) over every layer, as a 1.1 trace has it:
  // the graph launch with what its kernel nodes touch, and its kernels' times.
  void GraphStep() {
    std::vector<uint64_t> act = {Alloc(2 * kMiB)};
    for (int l = 0; l < layers_; ++l) {
      act.push_back(Alloc(2 * kMiB));
      Launch(fwd_, 2e-4, {{act[l], 0, 0}, {weights_[l], 2 * kMiB, 4096}, {act[l + 1], 0, 0}});
    }
    std::vector<trace::AccessRecord> touched;
    for (int l = layers_; l-- > 0;) {
      touched.push_back({act[l + 1], 0, 0});
      touched.push_back({weights_[l], 0, 0});
    }
    trace::GraphLaunchRecord g;
    g.graph_exec = 0x9a;
    g.thread = thread_;
    g.correlation_id = ++correlation_;
    g.accesses = touched;
    writer_->Write(g);
    // Its two kernel nodes timed under its correlation id (as CUPTI times a graph's kernels):
    // 1.2 ms from the first start to the last end.
    for (const auto& [start, end] : {std::pair<uint64_t, uint64_t>{1000, 501000},
                                     std::pair<uint64_t, uint64_t>{701000, 1201000}}) {
      trace::KernelTimeRecord t;
      t.correlation_id = correlation_;
      t.start_ns = start;
      t.end_ns = end;
      writer_->Write(t);
    }
    for (int l = layers_; l-- > 0;) Free(act[l + 1]);
    Free(act[0]);
  }
  void set_thread(uint32_t thread) { thread_ = thread; }  // of the launches written next
  // A persistent allocation of `bytes`, never used.
  void Unused(uint64_t bytes) { weights_.push_back(Alloc(bytes)); }
  // A record larger than the writer's buffer: dropped, and counted in the end record.
  void DroppedRecord() {
    const std::vector<trace::AccessRecord> accesses(10000, {weights_.front(), 0, 0});
    trace::LaunchRecord r;
    r.function_name = fwd_;
    r.accesses = accesses;
    writer_->Write(r);
  }
  void Finish() {
    for (const uint64_t w : weights_) Free(w);
    ASSERT_TRUE(writer_->Close().ok());
  }

 private:
  uint64_t Alloc(uint64_t bytes) {
    trace::AllocRecord r;
    r.kind = trace::AllocKind::kDevice;
    r.address = next_address_;
    next_address_ += bytes + kMiB;
    r.bytes = bytes;
    r.allocation_id = ++next_id_;
    address_[r.allocation_id] = r.address;
    writer_->Write(r);
    return r.allocation_id;
  }
  void Free(uint64_t id) {
    trace::FreeRecord r;
    r.allocation_id = id;
    r.address = address_[id];
    writer_->Write(r);
  }
  void Launch(trace::StringId name, double seconds, std::vector<trace::AccessRecord> accesses) {
    trace::LaunchRecord r;
    r.function_name = name;
    r.thread = thread_;
    r.correlation_id = ++correlation_;
    r.accesses = accesses;
    writer_->Write(r);
    Time(seconds);
  }
  void Time(double seconds) {  // of the last launch
    trace::KernelTimeRecord t;
    t.correlation_id = correlation_;
    t.start_ns = 1000;
    t.end_ns = 1000 + static_cast<uint64_t>(seconds * 1e9);
    writer_->Write(t);
  }

  const int layers_;
  std::unique_ptr<trace::TraceWriter> writer_;
  trace::StringId fwd_ = 0, bwd_ = 0;
  std::vector<uint64_t> weights_;
  std::map<uint64_t, uint64_t> address_;
  uint64_t next_address_ = 1ull << 40, next_id_ = 0, correlation_ = 0;
  uint32_t thread_ = 1;
};

std::string TracePath(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid()) + ".trace";
}

TEST(TraceWorkload, ReadsTheRepeatingStep) {
  const std::string path = TracePath("job");
  {
    TraceJob job(path, 3);
    job.Init();
    for (int i = 0; i < 3; ++i) job.Step();
    job.Finish();
  }
  absl::StatusOr<Workload> w = WorkloadFromTrace(path);
  ASSERT_TRUE(w.ok()) << w.status();
  std::remove(path.c_str());
  // 3 persistent weights, then per step 4 activations.
  ASSERT_EQ(w->allocations.size(), 7u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(w->allocations[i].persistent);
    EXPECT_EQ(w->allocations[i].bytes, 4 * kMiB);
  }
  EXPECT_FALSE(w->allocations[3].persistent);
  EXPECT_EQ(w->num_launches(), 6u);
  EXPECT_EQ(w->step.size(), 4u + 6u + 4u);
  EXPECT_EQ(w->step.front().kind, StepEvent::Kind::kAlloc);  // the step starts with its input
  EXPECT_NEAR(w->compute_seconds(), 3 * 2e-4 + 3 * 4e-4, 1e-9);
  // The first forward: input (chunk 0), weight 1's second chunk only, activation 1.
  const StepEvent& forward = w->step[2];
  ASSERT_EQ(forward.kind, StepEvent::Kind::kLaunch);
  EXPECT_EQ(forward.launch.kernel, "forward");
  ASSERT_EQ(forward.launch.accesses.size(), 3u);
  EXPECT_EQ(forward.launch.accesses[1].alloc_id, 1u);
  EXPECT_EQ(forward.launch.accesses[1].first_chunk, 1u);
  EXPECT_EQ(forward.launch.accesses[1].num_chunks, 1u);
  EXPECT_TRUE(ValidateWorkload(*w).ok());
  const StepSignature sig = ComputeStepSignature(*w);
  EXPECT_NE(sig.signature, 0u);
  EXPECT_EQ(sig.persistent, 3u);
}

// A step whose backward runs as one CUDA graph: the graph launch is one launch of the step, named
// after its exec, touching what its kernel nodes touch, with its recorded time.
TEST(TraceWorkload, AGraphLaunchIsOneLaunchWithItsAccessSet) {
  const std::string path = TracePath("graph");
  {
    TraceJob job(path, 3);
    job.Init();
    for (int i = 0; i < 3; ++i) job.GraphStep();
    job.Finish();
  }
  absl::StatusOr<Workload> w = WorkloadFromTrace(path);
  ASSERT_TRUE(w.ok()) << w.status();
  std::remove(path.c_str());
  EXPECT_EQ(w->num_launches(), 4u);  // 3 forward launches and the graph
  EXPECT_NEAR(w->compute_seconds(), 3 * 2e-4 + 1.2e-3, 1e-9);
  const StepEvent* graph = nullptr;
  for (const StepEvent& e : w->step) {
    if (e.kind == StepEvent::Kind::kLaunch && e.launch.kernel == "graph 0x9a") graph = &e;
  }
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->launch.accesses.size(), 6u);  // 3 activations and 3 weights
  EXPECT_TRUE(ValidateWorkload(*w).ok());
}

// A job with a 32 MiB arena (persistent, like a caching allocator's segment) whose launches reach
// it through pointers at offsets 0, 5 MiB, 8 MiB and 20 MiB, recorded as the recorder records them
// (interior pointers to the allocation's end, the base pointer as the whole allocation), and a
// 4 MiB step-local activation. Each pointer's range ends at the next offset seen (the engine's
// arena rule), for every simulator row and the planner alike.
void WriteArenaJob(const std::string& path, int steps) {
  trace::HeaderRecord header;
  header.job = "trace_workload_test arena";
  std::unique_ptr<trace::TraceWriter> writer = *trace::TraceWriter::Open(
      path, header, trace::WriterOptions{.flush = trace::WriterOptions::Flush::kManual});
  const trace::StringId name = writer->InternString("k");
  uint64_t next_id = 0, correlation = 0;
  auto alloc = [&](uint64_t address, uint64_t bytes) {
    trace::AllocRecord r;
    r.kind = trace::AllocKind::kDevice;
    r.address = address;
    r.bytes = bytes;
    r.allocation_id = ++next_id;
    writer->Write(r);
    return r.allocation_id;
  };
  auto launch = [&](std::vector<trace::AccessRecord> accesses) {
    trace::LaunchRecord r;
    r.function_name = name;
    r.correlation_id = ++correlation;
    r.accesses = std::move(accesses);
    writer->Write(r);
    trace::KernelTimeRecord t;
    t.correlation_id = correlation;
    t.start_ns = 1000;
    t.end_ns = 1000 + 500'000;  // 0.5 ms
    writer->Write(t);
  };
  constexpr uint64_t kArena = 32 * kMiB;
  const uint64_t arena = alloc(1ull << 40, kArena);
  auto at = [&](uint64_t offset) {
    return offset == 0 ? trace::AccessRecord{arena, 0, 0}
                       : trace::AccessRecord{arena, offset, kArena - offset};
  };
  for (int s = 0; s < steps; ++s) {
    const uint64_t x = alloc((1ull << 41) + static_cast<uint64_t>(s) * 64 * kMiB, 4 * kMiB);
    launch({at(0), {x, 0, 0}});
    launch({at(5 * kMiB)});
    launch({at(8 * kMiB), {x, 0, 0}});
    launch({at(20 * kMiB)});
    launch({at(0), at(20 * kMiB)});
    trace::FreeRecord f;
    f.allocation_id = x;
    writer->Write(f);
  }
  ASSERT_TRUE(writer->Close().ok());
}

TEST(TraceWorkload, ArenaPointersEndAtTheNextOffsetForEveryRow) {
  const std::string path = TracePath("arena");
  WriteArenaJob(path, 4);
  absl::StatusOr<Workload> w = WorkloadFromTrace(path);
  ASSERT_TRUE(w.ok()) << w.status();
  std::remove(path.c_str());
  ASSERT_EQ(w->num_launches(), 5u);
  // (a) The arena's ranges, by launch: [0, 5 MiB) is chunks 0-2, [5, 8) chunks 2-3, [8, 20) chunks
  // 4-9, [20, 32) chunks 10-15 (the last offset: to the end).
  uint64_t arena = 0;
  for (const WorkloadAllocation& a : w->allocations) {
    if (a.bytes == 32 * kMiB) arena = a.id;
  }
  ASSERT_NE(arena, 0u);
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> ranges;
  for (const StepEvent& e : w->step) {
    if (e.kind != StepEvent::Kind::kLaunch) continue;
    auto& r = ranges.emplace_back();
    for (const ChunkRange& c : e.launch.accesses) {
      if (c.alloc_id == arena) r.emplace_back(c.first_chunk, c.num_chunks);
    }
  }
  using R = std::vector<std::pair<uint32_t, uint32_t>>;
  EXPECT_EQ(ranges[0], (R{{0, 3}}));
  EXPECT_EQ(ranges[1], (R{{2, 2}}));
  EXPECT_EQ(ranges[2], (R{{4, 6}}));
  EXPECT_EQ(ranges[3], (R{{10, 6}}));
  EXPECT_EQ(ranges[4], (R{{0, 3}, {10, 6}}));
  // (b) The bounds hold for every row: 18 chunks at peak, on 10, 12 and 14.
  for (const uint64_t chunks : {10, 12, 14}) {
    SimOptions o;
    o.device_memory = chunks * kChunkBytes;
    PlanOptions plan_options;
    plan_options.sim = o;
    absl::StatusOr<PolicyFile> plan = PlanPolicy(*w, plan_options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const SimResult bound = ChunkLowerBound(*w, o);
    const SimResult cap = CapacityLowerBound(*w, o);
    for (const SimResult& r :
         {SimulateDemandPaging(*w, o), SimulateEngine(*w, o, MakeLruPolicy, "lru"),
          SimulateEngine(*w, o, MakeLearnedPolicy, "learned"),
          SimulateEngine(*w, o, MakeLearnedPolicy, "learned-nola", EngineSimOptions{0, false}),
          SimulatePlanned(*w, *plan, o)}) {
      EXPECT_LE(bound.bytes_moved(), r.bytes_moved()) << chunks << " chunks " << r.policy;
      EXPECT_LE(bound.step_seconds, r.step_seconds * (1 + 1e-9)) << chunks << " " << r.policy;
      EXPECT_LE(cap.step_seconds, r.step_seconds * (1 + 1e-9)) << chunks << " " << r.policy;
      EXPECT_EQ(r.overcommit_chunks, 0u) << chunks << " chunks " << r.policy;
    }
    EXPECT_GT(bound.bytes_moved(), 0u) << chunks;  // the arena does not fit: a real bound
  }
}

TEST(TraceWorkload, ATraceWithoutARepeatingStepIsOneError) {
  const std::string path = TracePath("once");
  {
    TraceJob job(path, 3);
    job.Init();
    job.Step();
    job.Finish();
  }
  absl::StatusOr<Workload> w = WorkloadFromTrace(path);
  std::remove(path.c_str());
  ASSERT_FALSE(w.ok());
  EXPECT_NE(std::string(w.status().message()).find(path + ": no repeating training step found"),
            std::string::npos)
      << w.status();
}

// Launches from several threads that repeat no step: the error says what that may mean.
TEST(TraceWorkload, NoStepInLaunchesOfSeveralThreadsSaysSo) {
  const std::string path = TracePath("threads");
  {
    TraceJob job(path, 3);
    job.Init();
    job.set_thread(1);
    job.Step(3);
    job.set_thread(2);
    job.Step(2);
    job.Finish();
  }
  absl::StatusOr<Workload> w = WorkloadFromTrace(path);
  std::remove(path.c_str());
  ASSERT_FALSE(w.ok());
  const std::string message(w.status().message());
  EXPECT_NE(message.find(path + ": no repeating training step found"), std::string::npos)
      << message;
  EXPECT_NE(message.find("; its launches came from 2 threads: threads that launch at once"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// An allocation larger than a workload may have (kMaxAllocationBytes) is refused as it is read,
// naming the trace and the record, before anything is sized by it.
TEST(TraceWorkload, AnAllocationOverOneTiBIsOneErrorNamingTheRecord) {
  const std::string path = TracePath("huge");
  {
    TraceJob job(path, 3);
    job.Init();
    job.Unused(uint64_t{1} << 50);
    for (int i = 0; i < 3; ++i) job.Step();
    job.Finish();
  }
  absl::StatusOr<Workload> w = WorkloadFromTrace(path);
  std::remove(path.c_str());
  ASSERT_FALSE(w.ok());
  const std::string message(w.status().message());
  EXPECT_EQ(message.rfind(path + ": alloc record at byte ", 0), 0u) << message;
  EXPECT_NE(message.find(": allocation 4 of 1125899906842624 bytes is more than the 1 TiB a "
                         "workload's may be"),
            std::string::npos)
      << message;
}

// A trace cut short (no end record: the recording died, or the file was cut on a record boundary)
// is an error, as in every tool (docs/trace-format.md).
TEST(TraceWorkload, ATraceWithoutItsEndRecordIsOneError) {
  const std::string path = TracePath("cut");
  {
    TraceJob job(path, 3);
    job.Init();
    for (int i = 0; i < 3; ++i) job.Step();
    job.Finish();
  }
  uint64_t end_record = 0;
  {
    std::unique_ptr<trace::TraceReader> reader = *trace::TraceReader::Open(path);
    trace::Record record;
    for (;;) {
      end_record = reader->offset();
      absl::StatusOr<bool> more = reader->Next(&record);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
    }
  }
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(end_record)), 0);
  absl::StatusOr<Workload> w = WorkloadFromTrace(path);
  std::remove(path.c_str());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message().rfind(absl::StrCat(path, ": truncated trace at byte ", end_record,
                                                    ": the trace has no end record"),
                                       0),
            0u)
      << w.status();
}

// Records the recorder dropped (its end record counts them) are one warning line naming the
// trace; the step is still read.
TEST(TraceWorkload, DroppedRecordsAreOneWarningLine) {
  const std::string path = TracePath("dropped");
  {
    TraceJob job(path, 3);
    job.Init();
    job.DroppedRecord();
    for (int i = 0; i < 3; ++i) job.Step();
    job.Finish();
  }
  std::string warning = "not set";
  absl::StatusOr<Workload> w = WorkloadFromTrace(path, &warning);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(warning, path +
                         ": the recorder dropped 1 records (it could not keep up); the step found "
                         "may lack allocations, frees or launches");
  std::remove(path.c_str());
  // A whole trace: no warning.
  {
    TraceJob job(path, 3);
    job.Init();
    for (int i = 0; i < 3; ++i) job.Step();
    job.Finish();
  }
  w = WorkloadFromTrace(path, &warning);
  std::remove(path.c_str());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(warning, "");
}

TEST(TraceWorkload, AMissingTraceNamesTheFile) {
  absl::StatusOr<Workload> w = WorkloadFromTrace("/nonexistent.trace");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(std::string(w.status().message()).find("/nonexistent.trace"), std::string::npos);
}

}  // namespace
}  // namespace spillway::policy
