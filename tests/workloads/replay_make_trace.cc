// replay_make_trace: writes the replayer tests' synthetic training job (replay_test_trace.h) to a
// file, to try spillway-replay by hand.
//   replay_make_trace OUT [--layers N] [--steps N] [--tensor-bytes SIZE] [--touch-bytes SIZE]
//                     [--no-modes]
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "common/size.h"
#include "tests/workloads/replay_test_trace.h"

int main(int argc, char** argv) {
  using spillway::replay::testing::TestTraceOptions;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: replay_make_trace OUT [--layers N] [--steps N] [--tensor-bytes SIZE] "
                 "[--touch-bytes SIZE] [--no-modes]\n");
    return 1;
  }
  TestTraceOptions options;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    bool ok = true;
    if (arg == "--no-modes") {
      options.modes = false;
      continue;
    } else if (arg == "--layers") {
      ok = absl::SimpleAtoi(value, &options.layers) && options.layers > 0;
    } else if (arg == "--steps") {
      ok = absl::SimpleAtoi(value, &options.steps) && options.steps > 0;
    } else if (arg == "--touch-bytes") {
      const auto size = spillway::ParseSize(value);
      ok = size.ok() && *size >= 8192;
      if (ok) options.touch_bytes = *size;
    } else if (arg == "--tensor-bytes") {
      const auto size = spillway::ParseSize(value);
      ok = size.ok() && *size >= 8192;
      if (ok) options.tensor_bytes = *size;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "replay_make_trace: bad option '%s %s'\n", arg.c_str(), value.c_str());
      return 1;
    }
    ++i;
  }
  const absl::Status status = spillway::replay::testing::WriteTestTrace(argv[1], options);
  if (!status.ok()) {
    std::fprintf(stderr, "replay_make_trace: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  std::printf(
      "%s: peak %llu bytes\n", argv[1],
      static_cast<unsigned long long>(spillway::replay::testing::TestTracePeakBytes(options)));
  return 0;
}
