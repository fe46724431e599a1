// TraceReader: reads a spillway trace (docs/trace-format.md) one record at a time, with every
// length checked against the file, so a truncated or corrupt trace gives an absl::Status naming
// the file, the byte offset and what is wrong, never a crash or an unbounded allocation. Memory
// held is one read window (1 MiB) plus the largest record (at most 16 MiB).
#ifndef SPILLWAY_PROFILER_TRACE_TRACE_READER_H_
#define SPILLWAY_PROFILER_TRACE_TRACE_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profiler/trace/trace_records.h"

namespace spillway::trace {

struct ReaderOptions {
  // Accept a trace that ends cleanly after a whole record but has no end record (the recording
  // process crashed or was killed): Next() then returns false at the end and unterminated() is
  // true. Off by default: such a trace is reported as truncated.
  bool allow_unterminated = false;
};

class TraceReader {
 public:
  // Opens `path` and checks the preamble and the header record. Errors start with the path. A
  // gzip-compressed trace (as the recorded models in workloads/traces/ are kept) is inflated into
  // memory first, up to 2 GiB.
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path,
                                                           const ReaderOptions& options = {});
  // Reads a trace held in memory; `name` stands for the file in errors.
  static absl::StatusOr<std::unique_ptr<TraceReader>> FromBytes(const std::string& name,
                                                                std::string bytes,
                                                                const ReaderOptions& options = {});
  ~TraceReader();

  // The next record after the header: true and `*record` set, or false after the end record
  // (or at the end of an unterminated trace, when allowed). Views in `*record` stay valid until
  // the next call. After an error, every later call returns the same error.
  absl::StatusOr<bool> Next(Record* record);

  // The header record (its views stay valid while the reader lives).
  const HeaderRecord& header() const { return header_; }
  uint16_t minor_version() const { return minor_; }
  // The end record, once Next() returned false on a terminated trace.
  const EndRecord& end() const { return end_; }
  bool unterminated() const { return unterminated_; }
  // Byte offset of the next record, and the file's size.
  uint64_t offset() const { return offset_; }
  uint64_t size() const { return size_; }
  uint64_t records_read() const { return records_; }     // header included
  uint64_t records_skipped() const { return skipped_; }  // of kinds newer than this reader

  class Source;

 private:
  TraceReader(std::string name, std::unique_ptr<Source> source, const ReaderOptions& options);
  absl::Status Start();
  absl::Status Corrupt(uint64_t at, absl::string_view what) const;
  absl::Status Truncated(uint64_t at, absl::string_view what) const;
  absl::Status Fail(absl::Status status);

  std::string name_;
  std::unique_ptr<Source> source_;
  ReaderOptions options_;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
  uint16_t minor_ = 0;
  uint64_t records_ = 0;
  uint64_t skipped_ = 0;
  bool done_ = false;
  bool unterminated_ = false;
  absl::Status error_;
  HeaderRecord header_;
  std::string header_payload_;  // backs header_'s views
  EndRecord end_;
  std::vector<Frame> frames_;
  std::vector<AccessRecord> accesses_;
  std::vector<uint8_t> modes_;
};

}  // namespace spillway::trace

#endif  // SPILLWAY_PROFILER_TRACE_TRACE_READER_H_
