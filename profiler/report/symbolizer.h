// Offline symbolization of call-site frames: each frame is (module, offset); the module's file is
// found by the path the trace recorded (or /usr/lib/debug/.build-id/), checked against the
// recorded build-id, and its offsets are turned into "function (file:line)" by addr2line when
// binutils is installed. Frames that cannot be symbolized keep their raw module+offset.
#ifndef SPILLWAY_PROFILER_REPORT_SYMBOLIZER_H_
#define SPILLWAY_PROFILER_REPORT_SYMBOLIZER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "profiler/report/trace_model.h"

namespace spillway::report {

struct SymbolizeResult {
  uint64_t modules_found = 0;    // a file with the recorded build-id was found
  uint64_t modules_missing = 0;  // no such file, or one with another build-id
  uint64_t frames_symbolized = 0;
  bool addr2line_available = true;
};

// The GNU build-id of the ELF file at `path` as lowercase hex; nullopt when it has none or is not
// a readable 64-bit ELF file.
std::optional<std::string> ReadBuildId(const std::string& path);

// Fills Frame::symbol where it is empty and the module can be symbolized. `addr2line` is the
// program to run (looked up on PATH).
SymbolizeResult Symbolize(TraceModel& model, const std::string& addr2line = "addr2line");

}  // namespace spillway::report

#endif  // SPILLWAY_PROFILER_REPORT_SYMBOLIZER_H_
