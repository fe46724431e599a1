// The TraceWriter's cost per record (docs/benchmarks.md): an allocation record and a launch record
// with 4 accesses, from 1 and 4 threads at once, written by the background flusher to /dev/null
// (or the file named by TRACE_BENCHMARK_PATH, to include a real disk). Records the writer dropped
// because the file could not keep up are reported as the `dropped` counter.
#include <cstdlib>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "profiler/trace/trace_writer.h"

namespace spillway::trace {
namespace {

TraceWriter& Writer() {
  static TraceWriter* writer = [] {
    const char* path = std::getenv("TRACE_BENCHMARK_PATH");
    HeaderRecord header;
    header.job = "trace_writer_benchmark";
    auto opened = TraceWriter::Open(path != nullptr ? path : "/dev/null", header);
    if (!opened.ok()) std::abort();
    return opened->release();  // like libspillway.so: never destroyed
  }();
  return *writer;
}

void BM_WriteAlloc(benchmark::State& state) {
  TraceWriter& writer = Writer();
  const uint64_t dropped_before = writer.records_dropped();
  AllocRecord r;
  r.thread = TraceThreadId();
  r.kind = AllocKind::kManaged;
  r.bytes = 1 << 20;
  r.call_site = 0x1234567890abcdef;
  for (auto _ : state) {
    r.time_ns = TraceClockNs();
    r.address += 4096;
    ++r.allocation_id;
    writer.Write(r);
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    state.counters["dropped"] = static_cast<double>(writer.records_dropped() - dropped_before);
  }
}
BENCHMARK(BM_WriteAlloc)->Threads(1)->Threads(4)->UseRealTime();

void BM_WriteLaunch4Accesses(benchmark::State& state) {
  TraceWriter& writer = Writer();
  const uint64_t dropped_before = writer.records_dropped();
  const StringId name = writer.InternString("void gemm_kernel<float, 128>(...)");
  const AccessRecord accesses[4] = {{1, 0, 0}, {2, 0, 4096}, {3, 512, 1 << 20}, {4, 0, 0}};
  LaunchRecord r;
  r.thread = TraceThreadId();
  r.stream = 7;
  r.function = 0xabc;
  r.function_name = name;
  r.grid[0] = 1024;
  r.block[0] = 256;
  r.accesses = accesses;
  for (auto _ : state) {
    r.time_ns = TraceClockNs();
    ++r.correlation_id;
    writer.Write(r);
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    state.counters["dropped"] = static_cast<double>(writer.records_dropped() - dropped_before);
  }
}
BENCHMARK(BM_WriteLaunch4Accesses)->Threads(1)->Threads(4)->UseRealTime();

}  // namespace
}  // namespace spillway::trace

BENCHMARK_MAIN();
