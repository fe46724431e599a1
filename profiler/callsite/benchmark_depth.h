// For the stack-walk benchmarks (call_site_benchmark, caller_module_benchmark): runs a body a fixed
// number of frames below the benchmark loop, so every walk measured covers a realistic stack.
#ifndef SPILLWAY_PROFILER_CALLSITE_BENCHMARK_DEPTH_H_
#define SPILLWAY_PROFILER_CALLSITE_BENCHMARK_DEPTH_H_

#include "benchmark/benchmark.h"

namespace spillway::callsite {

inline constexpr int kBenchmarkDepth = 16;  // extra frames below the benchmark body

// Calls `body` `depth` frames deeper than the caller.
template <typename Body>
__attribute__((noinline)) void AtDepth(int depth, const Body& body) {
  if (depth == 0) {
    body();
  } else {
    AtDepth(depth - 1, body);
  }
  benchmark::ClobberMemory();  // no tail call: each level keeps its frame
}

}  // namespace spillway::callsite

#endif  // SPILLWAY_PROFILER_CALLSITE_BENCHMARK_DEPTH_H_
