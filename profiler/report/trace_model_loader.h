// Reads a trace file (docs/trace-format.md) through the profiler's reader into a TraceModel:
// allocations paired with their frees, launches with their access sets and kernel times, copies,
// UVM records, modules and de-duplicated call sites.
#ifndef SPILLWAY_PROFILER_REPORT_TRACE_MODEL_LOADER_H_
#define SPILLWAY_PROFILER_REPORT_TRACE_MODEL_LOADER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "profiler/report/trace_model.h"

namespace spillway::report {

// Called now and then while reading: bytes read so far, of `total`.
using LoadProgress = std::function<void(uint64_t done, uint64_t total)>;

// Errors name the file and, for a truncated or corrupt trace, the offset (from the reader).
absl::StatusOr<TraceModel> LoadTraceModel(const std::string& path,
                                          const LoadProgress& progress = nullptr);

}  // namespace spillway::report

#endif  // SPILLWAY_PROFILER_REPORT_TRACE_MODEL_LOADER_H_
