// What SPILLWAY_DEVICE_MODULES costs per allocation (interpose/caller_module.h): one
// ListedCallerModule call with a listed module loaded but not among the callers, so the whole
// kCallerFrames walk and range check run, once with libunwind's walk (profiler/callsite/unwinder.h)
// and once with glibc's backtrace() (the fallback without libunwind). See docs/benchmarks.md.
#include <optional>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "interpose/caller_module.h"
#include "profiler/callsite/benchmark_depth.h"
#include "profiler/callsite/unwinder.h"

namespace spillway::interpose {
namespace {

constexpr int kDepth = callsite::kBenchmarkDepth;
using callsite::AtDepth;

void Run(benchmark::State& state, const char* unwinder) {
  callsite::ResetUnwinderForTesting(unwinder);
  const bool fast = PrepareCallerWalk();
  if (fast != (unwinder == std::string("libunwind.so.8"))) {
    state.SkipWithError("libunwind.so.8 missing");
    return;
  }
  const std::vector<std::string> parts = {"libstdc++"};  // loaded, never a caller here
  AtDepth(kDepth, [&] {
    for (auto _ : state) {
      std::optional<std::string> found = ListedCallerModule(parts);
      benchmark::DoNotOptimize(found);
    }
  });
}

void BM_ListedCallerModuleLibunwind(benchmark::State& state) { Run(state, "libunwind.so.8"); }
BENCHMARK(BM_ListedCallerModuleLibunwind);

void BM_ListedCallerModuleGlibc(benchmark::State& state) {
  Run(state, "libspillway-no-such-unwinder.so");
}
BENCHMARK(BM_ListedCallerModuleGlibc);

}  // namespace
}  // namespace spillway::interpose

BENCHMARK_MAIN();
