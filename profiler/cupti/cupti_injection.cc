// libspillway_cupti_injection.so: the CUPTI recorder on its own, for jobs libspillway.so cannot
// be preloaded into. With CUDA_INJECTION64_PATH=/path/libspillway_cupti_injection.so the CUDA
// driver loads this library during cuInit and calls InitializeInjection(), which starts the
// recorder writing to a trace of its own (docs/profile-cupti.md): kernels (as launch + kernel-time
// records under CUPTI's correlation ids), memcpy/memset times, driver allocations and frees, and
// unified-memory counters.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "profiler/cupti/cupti_recorder.h"
#include "profiler/cupti/cupti_trace_sink.h"
#include "profiler/trace/trace_writer.h"

namespace spillway::cupti {
namespace {

void Say(const std::string& line) { std::fprintf(stderr, "spillway-cupti: %s\n", line.c_str()); }

// The trace's path: $SPILLWAY_CUPTI_TRACE, else "$SPILLWAY_TRACE.cupti" (a sibling of the trace a
// preloaded libspillway.so may be writing), else spillway-cupti-<pid>.trace. "%p" becomes the pid.
std::string TracePath() {
  std::string path;
  if (auto explicit_path = GetEnv("SPILLWAY_CUPTI_TRACE");
      explicit_path && !explicit_path->empty()) {
    path = std::string(*explicit_path);
  } else if (auto trace = GetEnv("SPILLWAY_TRACE"); trace && !trace->empty()) {
    path = std::string(*trace) + ".cupti";
  } else {
    path = "spillway-cupti-%p.trace";
  }
  const std::string pid = std::to_string(getpid());
  for (size_t at = path.find("%p"); at != std::string::npos;
       at = path.find("%p", at + pid.size())) {
    path.replace(at, 2, pid);
  }
  return path;
}

std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!line.empty() && line.back() == '\0') line.pop_back();
  for (char& c : line) {
    if (c == '\0') c = ' ';
  }
  return line;
}

// Never destroyed: CUPTI may call the sink until the exit handler stopped the recorder.
trace::TraceWriter* g_writer = nullptr;
CuptiTraceSink* g_sink = nullptr;

void StopAtExit() {
  (void)StopCuptiRecorder(absl::Seconds(2));
  if (g_writer != nullptr) {
    if (absl::Status status = g_writer->Close(); !status.ok()) Say(std::string(status.message()));
  }
}

int Initialize() {
  static std::once_flag once;
  static int result = 0;
  std::call_once(once, [] {
    trace::HeaderRecord header;
    const std::string job = CommandLine();
    header.job = job;
    header.spillway_version = SPILLWAY_VERSION;
    header.start_ns = trace::TraceClockNs();
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    header.start_unix_ns =
        static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
    header.pid = static_cast<uint32_t>(getpid());
    const std::string path = TracePath();
    absl::StatusOr<std::unique_ptr<trace::TraceWriter>> writer =
        trace::TraceWriter::Open(path, header);
    if (!writer.ok()) {
      Say(absl::StrCat("cannot write the CUPTI trace: ", writer.status().message()));
      return;
    }
    g_writer = writer->release();
    g_sink = new CuptiTraceSink(g_writer, {.write_launches = true, .write_memory = true});
    CuptiRecorderOptions options;
    options.sink = g_sink;
    options.log = &Say;
    options.caller_correlation_ids = false;
    if (!StartCuptiRecorder(options).ok()) {
      (void)g_writer->Close();  // the reason was said through Say
      return;
    }
    std::atexit(&StopAtExit);
    result = 1;
  });
  return result;
}

}  // namespace
}  // namespace spillway::cupti

// Called by the CUDA driver (during cuInit) for the library named by CUDA_INJECTION64_PATH.
// Returns 1 when recording started, 0 otherwise (the job runs on either way).
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  return spillway::cupti::Initialize();
}
