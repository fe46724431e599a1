// TraceReader (trace_reader.h): the preamble, then frame by frame, each length validated against
// what is left of the file before anything is read or allocated.
#include "profiler/trace/trace_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "profiler/trace/trace_wire.h"
#include "zlib.h"

namespace spillway::trace {

// Bytes of the trace by offset; a returned view is valid until the next Read.
class TraceReader::Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  // REQUIRES: offset + n <= size().
  virtual absl::StatusOr<absl::string_view> Read(uint64_t offset, size_t n) = 0;
};

namespace {

class MemorySource : public TraceReader::Source {
 public:
  explicit MemorySource(std::string bytes) : bytes_(std::move(bytes)) {}
  uint64_t size() const override { return bytes_.size(); }
  absl::StatusOr<absl::string_view> Read(uint64_t offset, size_t n) override {
    return absl::string_view(bytes_).substr(offset, n);
  }

 private:
  std::string bytes_;
};

// Reads through a window of at least 1 MiB, so small records cost no system call each.
class FileSource : public TraceReader::Source {
 public:
  FileSource(int fd, uint64_t size) : fd_(fd), size_(size) {}
  ~FileSource() override { ::close(fd_); }
  uint64_t size() const override { return size_; }

  absl::StatusOr<absl::string_view> Read(uint64_t offset, size_t n) override {
    if (offset < window_start_ || offset + n > window_start_ + window_.size()) {
      const size_t want = static_cast<size_t>(
          std::min<uint64_t>(std::max<size_t>(n, kWindowBytes), size_ - offset));
      window_.resize(want);
      size_t got = 0;
      while (got < want) {
        const ssize_t r =
            ::pread(fd_, window_.data() + got, want - got, static_cast<off_t>(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          window_.clear();
          return absl::DataLossError(r < 0 ? std::strerror(errno) : "file shrank while read");
        }
        got += static_cast<size_t>(r);
      }
      window_start_ = offset;
    }
    return absl::string_view(window_).substr(offset - window_start_, n);
  }

 private:
  static constexpr size_t kWindowBytes = 1 << 20;
  int fd_;
  uint64_t size_;
  std::string window_;
  uint64_t window_start_ = 0;
};

uint16_t Load16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The most a gzip-compressed trace may inflate to (it is read into memory whole).
constexpr uint64_t kMaxInflatedBytes = uint64_t{2} << 30;

bool IsGzip(int fd) {
  unsigned char magic[2] = {0, 0};
  return ::pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// The trace inside the gzip file `fd` (of `size` bytes), or a one-line error naming `path`.
absl::StatusOr<std::string> Inflate(const std::string& path, int fd, uint64_t size) {
  std::string packed(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < packed.size()) {
    const ssize_t r =
        ::pread(fd, packed.data() + got, packed.size() - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", r < 0 ? std::strerror(errno) : "file shrank while read"));
    }
    got += static_cast<size_t>(r);
  }
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": cannot start gzip decompression"));
  }
  z.next_in = reinterpret_cast<Bytef*>(packed.data());
  z.avail_in = static_cast<uInt>(std::min<size_t>(packed.size(), UINT32_MAX));
  size_t fed = z.avail_in;
  std::string out;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out.size() >= kMaxInflatedBytes) {
      inflateEnd(&z);
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": the compressed trace inflates to more than ",
                       kMaxInflatedBytes >> 30, " GiB; decompress it (gunzip) and read the file"));
    }
    const size_t at = out.size();
    out.resize(std::min<uint64_t>(kMaxInflatedBytes, std::max<size_t>(2 * at, 1 << 20)));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    z.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - at, UINT32_MAX));
    if (z.avail_in == 0 && fed < packed.size()) {
      z.next_in = reinterpret_cast<Bytef*>(packed.data() + fed);
      z.avail_in = static_cast<uInt>(std::min<size_t>(packed.size() - fed, UINT32_MAX));
      fed += z.avail_in;
    }
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(out.size() - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && fed == packed.size()) {
      inflateEnd(&z);
      return absl::DataLossError(
          absl::StrCat(path, ": truncated gzip data after ", out.size(), " bytes of trace"));
    }
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      const std::string why = z.msg != nullptr ? z.msg : "invalid data";
      inflateEnd(&z);
      return absl::DataLossError(absl::StrCat(path, ": corrupt gzip data: ", why));
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace

TraceReader::TraceReader(std::string name, std::unique_ptr<Source> source,
                         const ReaderOptions& options)
    : name_(std::move(name)), source_(std::move(source)), options_(options) {
  size_ = source_->size();
}

TraceReader::~TraceReader() = default;

absl::StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path,
                                                               const ReaderOptions& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (IsGzip(fd)) {
    absl::StatusOr<std::string> bytes = Inflate(path, fd, static_cast<uint64_t>(st.st_size));
    ::close(fd);
    if (!bytes.ok()) return bytes.status();
    return FromBytes(path, *std::move(bytes), options);
  }
  auto source = std::make_unique<FileSource>(fd, static_cast<uint64_t>(st.st_size));
  std::unique_ptr<TraceReader> reader(new TraceReader(path, std::move(source), options));
  if (absl::Status s = reader->Start(); !s.ok()) return s;
  return reader;
}

absl::StatusOr<std::unique_ptr<TraceReader>> TraceReader::FromBytes(const std::string& name,
                                                                    std::string bytes,
                                                                    const ReaderOptions& options) {
  auto source = std::make_unique<MemorySource>(std::move(bytes));
  std::unique_ptr<TraceReader> reader(new TraceReader(name, std::move(source), options));
  if (absl::Status s = reader->Start(); !s.ok()) return s;
  return reader;
}

absl::Status TraceReader::Corrupt(uint64_t at, absl::string_view what) const {
  return absl::DataLossError(absl::StrCat(name_, ": corrupt trace at byte ", at, ": ", what));
}

absl::Status TraceReader::Truncated(uint64_t at, absl::string_view what) const {
  return absl::DataLossError(absl::StrCat(name_, ": truncated trace at byte ", at, ": ", what));
}

absl::Status TraceReader::Fail(absl::Status status) {
  error_ = status;
  return status;
}

absl::Status TraceReader::Start() {
  if (size_ == 0) return absl::InvalidArgumentError(absl::StrCat(name_, ": empty file"));
  absl::StatusOr<absl::string_view> preamble =
      source_->Read(0, static_cast<size_t>(std::min<uint64_t>(size_, wire::kPreambleBytes)));
  if (!preamble.ok()) return Corrupt(0, preamble.status().message());
  const size_t magic_bytes = std::min(preamble->size(), sizeof(wire::kMagic));
  if (std::memcmp(preamble->data(), wire::kMagic, magic_bytes) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": not a spillway trace (no SPWTRACE magic at byte 0)"));
  }
  if (size_ < wire::kPreambleBytes) {
    return Truncated(size_, "the file ends inside the 16-byte preamble");
  }
  const uint16_t major = Load16(preamble->data() + 8);
  minor_ = Load16(preamble->data() + 10);
  const uint32_t preamble_bytes = Load32(preamble->data() + 12);
  if (major != kFormatMajor) {
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": trace format ", major, ".", minor_,
        " is not readable by this version of spillway (it reads ", kFormatMajor, ".x)"));
  }
  if (preamble_bytes < wire::kPreambleBytes || preamble_bytes > size_) {
    return Corrupt(12, absl::StrCat("preamble length ", preamble_bytes, " is invalid"));
  }
  offset_ = preamble_bytes;
  // The header record comes first.
  Record record;
  absl::StatusOr<bool> first = Next(&record);
  if (!first.ok()) return first.status();
  if (!*first || !std::holds_alternative<HeaderRecord>(record)) {
    return Fail(Corrupt(preamble_bytes, "the first record is not the header"));
  }
  return absl::OkStatus();
}

namespace {

template <typename RecordT>
const char* DecodeInto(absl::string_view payload, std::vector<Frame>* frames,
                       std::vector<AccessRecord>* accesses, std::vector<uint8_t>* modes,
                       Record* out) {
  RecordT record;
  wire::DecodeVisitor v{payload, frames, accesses, modes};
  wire::FieldsOf(v, record);
  if (v.error != nullptr) return v.error;
  *out = record;
  return nullptr;
}

const char* Decode(RecordKind kind, absl::string_view payload, std::vector<Frame>* frames,
                   std::vector<AccessRecord>* accesses, std::vector<uint8_t>* modes, Record* out) {
  switch (kind) {
#define SPILLWAY_DECODE(Kind, Type) \
  case RecordKind::Kind:            \
    return DecodeInto<Type>(payload, frames, accesses, modes, out);
    SPILLWAY_DECODE(kHeader, HeaderRecord)
    SPILLWAY_DECODE(kString, StringRecord)
    SPILLWAY_DECODE(kModule, ModuleRecord)
    SPILLWAY_DECODE(kCallSite, CallSiteRecord)
    SPILLWAY_DECODE(kAlloc, AllocRecord)
    SPILLWAY_DECODE(kFree, FreeRecord)
    SPILLWAY_DECODE(kLaunch, LaunchRecord)
    SPILLWAY_DECODE(kMemcpy, MemcpyRecord)
    SPILLWAY_DECODE(kMemset, MemsetRecord)
    SPILLWAY_DECODE(kSynchronize, SynchronizeRecord)
    SPILLWAY_DECODE(kGraphLaunch, GraphLaunchRecord)
    SPILLWAY_DECODE(kModuleLoad, ModuleLoadRecord)
    SPILLWAY_DECODE(kKernelTime, KernelTimeRecord)
    SPILLWAY_DECODE(kUvmCounter, UvmCounterRecord)
    SPILLWAY_DECODE(kResident, ResidentRecord)
    SPILLWAY_DECODE(kEnd, EndRecord)
#undef SPILLWAY_DECODE
  }
  return "unknown record kind";
}

}  // namespace

absl::StatusOr<bool> TraceReader::Next(Record* record) {
  if (!error_.ok()) return error_;
  while (!done_) {
    const uint64_t at = offset_;
    const uint64_t left = size_ - at;
    if (left == 0) {
      if (options_.allow_unterminated && records_ > 0) {
        done_ = unterminated_ = true;
        return false;
      }
      return Fail(Truncated(at,
                            "the trace has no end record (cut short, or the recording "
                            "process did not close it)"));
    }
    if (left < wire::kFrameBytes) {
      return Fail(Truncated(at, absl::StrCat("only ", left, " bytes left, a record frame has 8")));
    }
    absl::StatusOr<absl::string_view> frame = source_->Read(at, wire::kFrameBytes);
    if (!frame.ok()) return Fail(Corrupt(at, frame.status().message()));
    const uint16_t raw_kind = Load16(frame->data());
    const uint16_t flags = Load16(frame->data() + 2);
    const uint32_t length = Load32(frame->data() + 4);
    const bool newer = minor_ > kFormatMinor;
    const bool known = raw_kind >= static_cast<uint16_t>(RecordKind::kHeader) &&
                       raw_kind <= static_cast<uint16_t>(RecordKind::kEnd);
    if (raw_kind == 0 || (!known && !newer)) {
      return Fail(Corrupt(at, absl::StrCat("unknown record kind ", raw_kind)));
    }
    if (flags != 0 && !newer) {
      return Fail(Corrupt(at, absl::StrCat("record flags ", flags, " are not 0")));
    }
    if (length > wire::kMaxPayloadBytes) {
      return Fail(Corrupt(at, absl::StrCat("record length ", length, " exceeds the 16 MiB limit")));
    }
    if (length > left - wire::kFrameBytes) {
      return Fail(Truncated(at, absl::StrCat("a record of ", length, " bytes but only ",
                                             left - wire::kFrameBytes, " bytes left")));
    }
    offset_ = at + wire::kFrameBytes + length;
    if (!known) {
      ++skipped_;
      ++records_;
      continue;
    }
    const auto kind = static_cast<RecordKind>(raw_kind);
    absl::StatusOr<absl::string_view> payload = source_->Read(at + wire::kFrameBytes, length);
    if (!payload.ok()) return Fail(Corrupt(at, payload.status().message()));
    if (const char* error = Decode(kind, *payload, &frames_, &accesses_, &modes_, record)) {
      return Fail(Corrupt(at, absl::StrCat(RecordKindName(kind), " record: ", error)));
    }
    if (kind == RecordKind::kHeader) {
      if (records_ != 0) return Fail(Corrupt(at, "a second header record"));
      header_payload_.assign(payload->data(), payload->size());
      const char* error =
          DecodeInto<HeaderRecord>(header_payload_, nullptr, nullptr, nullptr, record);
      if (error != nullptr) return Fail(Corrupt(at, error));
      header_ = std::get<HeaderRecord>(*record);
    } else if (records_ == 0) {
      return Fail(Corrupt(at, "the first record is not the header"));
    }
    if (kind == RecordKind::kEnd) {
      end_ = std::get<EndRecord>(*record);
      if (offset_ != size_) {
        return Fail(Corrupt(offset_, absl::StrCat(size_ - offset_, " bytes after the end record")));
      }
      if (end_.records_written != records_) {
        return Fail(Corrupt(at, absl::StrCat("the end record counts ", end_.records_written,
                                             " records before it, the file has ", records_)));
      }
      ++records_;
      done_ = true;
      return false;
    }
    ++records_;
    return true;
  }
  return false;
}

}  // namespace spillway::trace
