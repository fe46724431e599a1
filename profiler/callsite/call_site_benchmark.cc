// What a call-site stack costs in record mode: the raw libunwind walk, glibc's backtrace() (what
// interpose/caller_module.cc uses) for comparison, the module lookup and the whole Capture() of
// an already-known site, at a stack depth of about 20 frames. See docs/benchmarks.md.
#include <execinfo.h>

#include "benchmark/benchmark.h"
#include "profiler/callsite/benchmark_depth.h"
#include "profiler/callsite/call_site_table.h"
#include "profiler/callsite/unwinder.h"

namespace spillway::callsite {
namespace {

constexpr int kDepth = kBenchmarkDepth;

void BM_LibunwindBacktrace(benchmark::State& state) {
  if (!UnwinderAvailable()) state.SkipWithError("libunwind.so.8 missing");
  void* pcs[64];
  AtDepth(kDepth, [&] {
    for (auto _ : state) benchmark::DoNotOptimize(Backtrace(pcs, 64));
  });
}
BENCHMARK(BM_LibunwindBacktrace);

void BM_GlibcBacktrace(benchmark::State& state) {
  void* pcs[64];
  AtDepth(kDepth, [&] {
    for (auto _ : state) benchmark::DoNotOptimize(backtrace(pcs, 64));
  });
}
BENCHMARK(BM_GlibcBacktrace);

void BM_ResolveFrames(benchmark::State& state) {
  void* pcs[64];
  const int count = Backtrace(pcs, 64);
  ModuleMap map;
  Location where[64];
  for (auto _ : state) {
    map.Resolve(pcs, count, where);
    benchmark::DoNotOptimize(where);
  }
}
BENCHMARK(BM_ResolveFrames);

void BM_CaptureKnownSite(benchmark::State& state) {
  CallSiteTable table;
  AtDepth(kDepth, [&] {
    for (auto _ : state) benchmark::DoNotOptimize(table.Capture(nullptr, nullptr));
  });
}
BENCHMARK(BM_CaptureKnownSite);

}  // namespace
}  // namespace spillway::callsite

BENCHMARK_MAIN();
