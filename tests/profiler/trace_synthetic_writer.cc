// Writes the synthetic training trace (report_synthetic_trace.h) as a trace file through the
// TraceWriter, for the tool tests (trace_tools_test.sh).
//   trace_synthetic_writer OUT.trace [STEPS]
#include <cstdio>
#include <cstdlib>

#include "tests/profiler/report_synthetic_trace.h"
#include "tests/profiler/trace_from_model.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fputs("usage: trace_synthetic_writer OUT.trace [STEPS]\n", stderr);
    return 2;
  }
  spillway::report::testing::SyntheticShape shape;
  if (argc == 3) shape.steps = std::atoi(argv[2]);
  const auto written = spillway::report::testing::WriteModelAsTrace(
      spillway::report::testing::SyntheticTrace(shape), argv[1]);
  if (!written.ok()) {
    std::fprintf(stderr, "trace_synthetic_writer: %s\n",
                 std::string(written.status().message()).c_str());
    return 1;
  }
  return 0;
}
