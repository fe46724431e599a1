// Exports a trace as Chrome trace-event JSON that opens in Perfetto (ui.perfetto.dev) and
// chrome://tracing: a counter track of live (and managed resident) memory, one track per stream
// with kernel, memcpy and memset slices, a host track of launches with flow arrows to their
// kernels, and async slices for allocation lifetimes. Written gzip-compressed.
#ifndef SPILLWAY_PROFILER_REPORT_PERFETTO_EXPORT_H_
#define SPILLWAY_PROFILER_REPORT_PERFETTO_EXPORT_H_

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profiler/report/trace_model.h"

struct z_stream_s;  // zlib's stream state

namespace spillway::report {

// The trace-event JSON document, handed to `sink` in pieces (about 4 MiB each) in order.
void WriteChromeTrace(const TraceModel& model, const std::function<void(std::string_view)>& sink);
// The same document as one string.
std::string ChromeTraceJson(const TraceModel& model);

// Compresses a stream of pieces into one gzip member (RFC 1952).
class GzipStream {
 public:
  GzipStream();
  ~GzipStream();
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  void Append(std::string_view data);
  // The compressed bytes; an error when zlib failed.
  absl::StatusOr<std::string> Finish();

 private:
  void Deflate(std::string_view data, int flush);

  ::z_stream_s* stream_;
  std::string out_;
  bool initialized_ = false;
  bool ok_ = false;
  bool finished_ = false;
};

// `data` compressed as one gzip member (RFC 1952).
absl::StatusOr<std::string> Gzip(std::string_view data);

// Writes ChromeTraceJson(model), gzip-compressed, to `path` (atomically).
absl::Status WritePerfettoTrace(const TraceModel& model, const std::string& path);

}  // namespace spillway::report

#endif  // SPILLWAY_PROFILER_REPORT_PERFETTO_EXPORT_H_
