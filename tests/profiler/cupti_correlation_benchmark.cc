// What the CUPTI correlation costs on the launch path (docs/profile-cupti.md): the record side's
// CuptiCorrelationScope around each real driver call, and the recorder's table write in CUPTI's
// callback plus the read when the activity record arrives. CUPTI's own callback dispatch is not
// included (it needs the real driver).
#include <benchmark/benchmark.h>

#include <cstdint>

#include "profiler/cupti/correlation_table.h"
#include "profiler/cupti/cupti_recorder.h"

namespace spillway::cupti {
namespace {

void BM_CorrelationScope(benchmark::State& state) {
  uint64_t id = 1;
  for (auto _ : state) {
    CuptiCorrelationScope scope(id++);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_CorrelationScope);

void BM_TablePutThenGet(benchmark::State& state) {
  CorrelationTable table(size_t{1} << 16);
  uint32_t cupti_id = 1;
  uint64_t sum = 0;
  for (auto _ : state) {
    table.Put(cupti_id, cupti_id + 1000);
    sum += table.Get(cupti_id, /*erase=*/true);
    ++cupti_id;
  }
  benchmark::DoNotOptimize(sum);
}
BENCHMARK(BM_TablePutThenGet);

// The callback writes while another thread (CUPTI's buffer thread) reads older ids.
void BM_TablePutWithConcurrentReader(benchmark::State& state) {
  static CorrelationTable* table = new CorrelationTable(size_t{1} << 16);
  uint32_t cupti_id = static_cast<uint32_t>(state.thread_index()) * 1000000 + 1;
  uint64_t sum = 0;
  for (auto _ : state) {
    if (state.thread_index() == 0) {
      table->Put(cupti_id, cupti_id);
    } else {
      sum += table->Get(cupti_id, /*erase=*/true);
    }
    ++cupti_id;
  }
  benchmark::DoNotOptimize(sum);
}
BENCHMARK(BM_TablePutWithConcurrentReader)->Threads(2);

}  // namespace
}  // namespace spillway::cupti

BENCHMARK_MAIN();
