// Tests of the trace format (docs/trace-format.md): every record kind survives the writer and the
// reader; definitions come before their uses; newer minor versions' unknown kinds are skipped;
// a trace truncated at every offset or with any byte corrupted gives an error with the file name
// and byte offset, never a crash.
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "profiler/trace/trace_reader.h"
#include "profiler/trace/trace_wire.h"
#include "profiler/trace/trace_writer.h"
#include "tests/profiler/trace_test_util.h"
#include "zlib.h"

namespace spillway::trace {
namespace {

using testing::Encoded;
using testing::OneOfEachKind;
using testing::TempPath;
using testing::TestHeader;

// Writes the definitions and one record of every kind; returns the records as expected back.
std::vector<Record> WriteEveryKind(const std::string& path, WriterOptions options = {}) {
  auto writer = TraceWriter::Open(path, TestHeader(), options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  std::vector<Record> expected;
  TraceWriter& w = **writer;
  const ModuleId module = w.InternModule("0123456789abcdef", "/usr/lib/libtorch_cuda.so");
  const ModuleId other = w.InternModule("", "[vdso]");
  expected.push_back(ModuleRecord{module, "0123456789abcdef", "/usr/lib/libtorch_cuda.so"});
  expected.push_back(ModuleRecord{other, "", "[vdso]"});
  const StringId name = w.InternString("void gemm<float>(float*, int)");
  expected.push_back(StringRecord{name, "void gemm<float>(float*, int)"});
  static const Frame kFrames[] = {{module, 0x1234}, {other, 0x10}, {module, ~0ull}};
  const CallSiteId site = w.InternCallSite(kFrames);
  expected.push_back(CallSiteRecord{site, kFrames});
  for (const Record& r : OneOfEachKind(name, site)) {
    testing::WriteRecord(w, r);
    expected.push_back(r);
  }
  EXPECT_TRUE(w.Close().ok());
  return expected;
}

TEST(TraceFormat, EveryRecordKindRoundTrips) {
  TempPath path("every_kind.trace");
  const std::vector<Record> expected = WriteEveryKind(path.path());
  auto reader = TraceReader::Open(path.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(Encoded((*reader)->header()), Encoded(TestHeader()));
  EXPECT_EQ((*reader)->header().job, "train.py --epochs 3");
  EXPECT_EQ((*reader)->header().pid, 31337u);
  EXPECT_EQ((*reader)->minor_version(), kFormatMinor);
  std::vector<Record> got;
  Record record;
  std::vector<bool> kinds_seen(17, false);
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    kinds_seen[static_cast<size_t>(RecordKindOf(record))] = true;
    // Views are valid until the next call: compare now.
    ASSERT_LT(got.size(), expected.size());
    EXPECT_EQ(Encoded(record), Encoded(expected[got.size()]))
        << "record " << got.size() << " (" << RecordKindName(RecordKindOf(record)) << ")";
    if (const auto* launch = std::get_if<LaunchRecord>(&record);
        launch != nullptr && !launch->accesses.empty()) {
      EXPECT_EQ(launch->grid[0], 1024u);
      EXPECT_EQ(launch->block[2], 4u);
      ASSERT_EQ(launch->accesses.size(), 3u);
      EXPECT_EQ(launch->accesses[1].offset, 512u);
    }
    if (const auto* graph = std::get_if<GraphLaunchRecord>(&record);
        graph != nullptr && !graph->accesses.empty()) {
      ASSERT_EQ(graph->accesses.size(), 3u);
      EXPECT_EQ(graph->accesses[0].bytes, 4096u);
    }
    if (const auto* site = std::get_if<CallSiteRecord>(&record)) {
      ASSERT_EQ(site->frames.size(), 3u);
      EXPECT_EQ(site->frames[2].offset, ~0ull);
    }
    got.push_back(record);
  }
  EXPECT_EQ(got.size(), expected.size());
  for (RecordKind kind = RecordKind::kString; kind < RecordKind::kEnd;
       kind = static_cast<RecordKind>(static_cast<int>(kind) + 1)) {
    EXPECT_TRUE(kinds_seen[static_cast<size_t>(kind)]) << RecordKindName(kind);
  }
  EXPECT_EQ((*reader)->end().records_dropped, 0u);
  EXPECT_EQ((*reader)->end().records_written, expected.size() + 1);  // + the header
  EXPECT_GE((*reader)->end().end_ns, 1u);
}

TEST(TraceFormat, InterningDeduplicatesAndCallSiteIdsAreStable) {
  TempPath a("intern_a.trace"), b("intern_b.trace");
  CallSiteId first_run = 0;
  for (const TempPath* path : {&a, &b}) {
    auto writer = TraceWriter::Open(path->path(), TestHeader());
    ASSERT_TRUE(writer.ok());
    TraceWriter& w = **writer;
    // The second run loads the modules in another order: ids differ, call-site ids must not.
    const bool second = path == &b;
    if (second) w.InternModule("ffff", "/lib/other.so");
    const ModuleId m = w.InternModule("abcd", "/lib/x.so");
    EXPECT_EQ(w.InternModule("abcd", "/lib/x.so"), m);
    EXPECT_EQ(w.InternString("k"), w.InternString("k"));
    EXPECT_NE(w.InternString("k"), w.InternString("k2"));
    const Frame frames[] = {{m, 0x10}, {m, 0x20}};
    const CallSiteId site = w.InternCallSite(frames);
    EXPECT_EQ(w.InternCallSite(frames), site);
    const Frame other[] = {{m, 0x10}, {m, 0x21}};
    EXPECT_NE(w.InternCallSite(other), site);
    EXPECT_EQ(w.InternCallSite({}), 0u);
    // The id is HashCallSite over the build-ids, as the shim's run-time call sites name them.
    EXPECT_EQ(site, HashCallSite(frames, [m](ModuleId id) {
                return id == m ? absl::string_view("abcd") : absl::string_view();
              }));
    EXPECT_NE(site, HashCallSite(frames, [](ModuleId) { return absl::string_view("abce"); }));
    if (second) {
      EXPECT_EQ(site, first_run);
    } else {
      first_run = site;
    }
    ASSERT_TRUE(w.Close().ok());
    EXPECT_TRUE(w.Close().ok());  // a second close is harmless
  }
  // Definitions are written once each: 2 modules... count the records of the first trace.
  auto records = testing::ReadAllEncoded(a.path());
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 5u);  // module, strings k and k2, two call sites
}

TEST(TraceFormat, NewerMinorVersionsUnknownKindsAreSkipped) {
  // preamble (minor + 1), header, an unknown kind 99, a known kind with an appended field, end.
  std::string bytes(wire::kPreambleBytes, '\0');
  wire::EncodePreamble(bytes.data());
  const uint16_t newer = kFormatMinor + 1;
  std::memcpy(bytes.data() + 10, &newer, 2);
  const auto append = [&](const auto& record, const std::string& extra, uint16_t kind) {
    const size_t payload = wire::PayloadBytes(record);
    std::string frame(wire::kFrameBytes + payload, '\0');
    wire::EncodeRecord(record, payload, frame.data());
    const uint32_t length = static_cast<uint32_t>(payload + extra.size());
    std::memcpy(frame.data(), &kind, 2);
    std::memcpy(frame.data() + 4, &length, 4);
    bytes += frame + extra;
  };
  append(TestHeader(), "", 1);
  append(ResidentRecord{5, 6}, "", 99);
  append(ResidentRecord{7, 8}, "newfield", static_cast<uint16_t>(RecordKind::kResident));
  append(EndRecord{9, 3, 0}, "", static_cast<uint16_t>(RecordKind::kEnd));
  auto reader = TraceReader::FromBytes("newer.trace", bytes);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Record record;
  absl::StatusOr<bool> more = (*reader)->Next(&record);
  ASSERT_TRUE(more.ok() && *more) << more.status();
  ASSERT_TRUE(std::holds_alternative<ResidentRecord>(record));
  EXPECT_EQ(std::get<ResidentRecord>(record).bytes, 8u);
  more = (*reader)->Next(&record);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_FALSE(*more);
  EXPECT_EQ((*reader)->records_skipped(), 1u);

  // The same unknown kind in a file of this reader's own version is corruption.
  const uint16_t same = kFormatMinor;
  std::memcpy(bytes.data() + 10, &same, 2);
  reader = TraceReader::FromBytes("same.trace", bytes);
  ASSERT_TRUE(reader.ok());
  more = (*reader)->Next(&record);
  ASSERT_FALSE(more.ok());
  EXPECT_TRUE(absl::StrContains(more.status().message(), "unknown record kind 99"))
      << more.status();
}

// A 1.0 trace's graph launch ends at its correlation id; read by this version, it has no accesses.
TEST(TraceFormat, AGraphLaunchOfVersion10HasNoAccessSet) {
  std::string bytes(wire::kPreambleBytes, '\0');
  wire::EncodePreamble(bytes.data());
  const uint16_t v10 = 0;
  std::memcpy(bytes.data() + 10, &v10, 2);
  const auto append = [&](const auto& record, size_t drop) {
    const size_t payload = wire::PayloadBytes(record);
    std::string frame(wire::kFrameBytes + payload, '\0');
    wire::EncodeRecord(record, payload, frame.data());
    const uint32_t length = static_cast<uint32_t>(payload - drop);
    std::memcpy(frame.data() + 4, &length, 4);
    bytes += frame.substr(0, wire::kFrameBytes + length);
  };
  append(TestHeader(), 0);
  append(GraphLaunchRecord{5, 6, 0x9a, 3, 80, {}}, 4);  // without the list's count: 1.0's fields
  append(EndRecord{9, 2, 0}, 0);
  auto reader = TraceReader::FromBytes("graph-1.0.trace", bytes);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->minor_version(), 0u);
  Record record;
  absl::StatusOr<bool> more = (*reader)->Next(&record);
  ASSERT_TRUE(more.ok() && *more) << more.status();
  ASSERT_TRUE(std::holds_alternative<GraphLaunchRecord>(record));
  EXPECT_EQ(std::get<GraphLaunchRecord>(record).correlation_id, 80u);
  EXPECT_TRUE(std::get<GraphLaunchRecord>(record).accesses.empty());
  more = (*reader)->Next(&record);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_FALSE(*more);
}

TEST(TraceFormat, BadFilesGiveOneClearError) {
  TempPath path("bad.trace");
  auto missing = TraceReader::Open("/nonexistent/dir/x.trace");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StartsWith(missing.status().message(), "/nonexistent/dir/x.trace: "));

  testing::WriteFile(path.path(), "");
  auto empty = TraceReader::Open(path.path());
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(absl::StrContains(empty.status().message(), "empty file"));

  testing::WriteFile(path.path(), "{\"traceEvents\": []}");
  auto json = TraceReader::Open(path.path());
  ASSERT_FALSE(json.ok());
  EXPECT_TRUE(absl::StrContains(json.status().message(), "not a spillway trace"));

  std::string future(wire::kPreambleBytes, '\0');
  wire::EncodePreamble(future.data());
  const uint16_t major = kFormatMajor + 1, minor = 0;
  std::memcpy(future.data() + 8, &major, 2);
  std::memcpy(future.data() + 10, &minor, 2);
  auto newer = TraceReader::FromBytes("future.trace", future);
  ASSERT_FALSE(newer.ok());
  EXPECT_TRUE(absl::StrContains(newer.status().message(), "format 2.0 is not readable"))
      << newer.status();
}

// Reads a whole trace from bytes: the error, or OK.
absl::Status ReadBytes(const std::string& name, const std::string& bytes) {
  auto reader = TraceReader::FromBytes(name, bytes);
  if (!reader.ok()) return reader.status();
  Record record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
  }
}

TEST(TraceFormat, TruncatedAtEveryOffsetIsAnErrorWithTheOffset) {
  TempPath path("truncate.trace");
  WriteEveryKind(path.path());
  const std::string bytes = testing::ReadFile(path.path());
  ASSERT_GT(bytes.size(), 500u);
  ASSERT_TRUE(ReadBytes("whole.trace", bytes).ok());
  for (size_t size = 0; size < bytes.size(); ++size) {
    const absl::Status status = ReadBytes("cut.trace", bytes.substr(0, size));
    ASSERT_FALSE(status.ok()) << "accepted a trace cut at " << size;
    ASSERT_TRUE(absl::StartsWith(status.message(), "cut.trace: ")) << status;
    if (size >= sizeof(wire::kMagic)) {
      ASSERT_TRUE(absl::StrContains(status.message(), absl::StrCat("at byte ")))
          << size << ": " << status;
    }
  }
  // Through a file, too: the offset where the cut record starts is named.
  testing::WriteFile(path.path(), bytes.substr(0, bytes.size() - 3));
  auto reader = TraceReader::Open(path.path());
  ASSERT_TRUE(reader.ok());
  Record record;
  absl::StatusOr<bool> more = true;
  while (more.ok() && *more) more = (*reader)->Next(&record);
  ASSERT_FALSE(more.ok());
  EXPECT_TRUE(absl::StrContains(more.status().message(),
                                absl::StrCat("truncated trace at byte ", bytes.size() - 8 - 24)))
      << more.status();
}

TEST(TraceFormat, UnterminatedTracesAreAcceptedOnlyWhenAsked) {
  TempPath path("unterminated.trace");
  WriteEveryKind(path.path());
  std::string bytes = testing::ReadFile(path.path());
  bytes.resize(bytes.size() - wire::kFrameBytes - 24);  // drop the end record
  EXPECT_FALSE(ReadBytes("u.trace", bytes).ok());
  ReaderOptions options;
  options.allow_unterminated = true;
  auto reader = TraceReader::FromBytes("u.trace", bytes, options);
  ASSERT_TRUE(reader.ok());
  Record record;
  int n = 0;
  absl::StatusOr<bool> more;
  while ((more = (*reader)->Next(&record)).ok() && *more) ++n;
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_TRUE((*reader)->unterminated());
  EXPECT_EQ(n, 4 + static_cast<int>(OneOfEachKind(0, 0).size()));
}

TEST(TraceFormat, CorruptedBytesNeverCrash) {
  TempPath path("corrupt.trace");
  WriteEveryKind(path.path());
  const std::string bytes = testing::ReadFile(path.path());
  int errors = 0;
  for (size_t at = 0; at < bytes.size(); ++at) {
    for (const unsigned char mask : {0xffu, 0x80u, 0x01u}) {
      std::string corrupt = bytes;
      corrupt[at] = static_cast<char>(static_cast<unsigned char>(corrupt[at]) ^ mask);
      const absl::Status status = ReadBytes("bad.trace", corrupt);
      if (status.ok()) continue;  // a changed value inside a payload (a time, an address)
      ++errors;
      ASSERT_TRUE(absl::StartsWith(status.message(), "bad.trace: ")) << status;
      if (at >= 12) {  // past the magic and the version, which have errors of their own
        ASSERT_TRUE(absl::StrContains(status.message(), " at byte ")) << at << ": " << status;
      }
    }
  }
  EXPECT_GT(errors, 300);
  // A frame's length set beyond the file: named as such, no allocation attempted.
  std::string huge = bytes;
  const uint32_t length = 0x7fffffff;
  std::memcpy(huge.data() + wire::kPreambleBytes + 4, &length, 4);
  const absl::Status status = ReadBytes("huge.trace", huge);
  EXPECT_TRUE(absl::StrContains(status.message(), "corrupt trace at byte 16: record length"))
      << status;
}

// 1.2's access modes: the count must match the accesses, and each mode is 0..3.
TEST(TraceFormat, AccessModesMatchTheAccessesOneForOne) {
  static const AccessRecord kTwo[] = {{7, 0, 0}, {9, 0, 0}};
  const auto trace_with = [](absl::Span<const uint8_t> modes, uint8_t patch_last) {
    std::string bytes(wire::kPreambleBytes, '\0');
    wire::EncodePreamble(bytes.data());
    const auto append = [&](const auto& record) {
      const size_t payload = wire::PayloadBytes(record);
      std::string frame(wire::kFrameBytes + payload, '\0');
      wire::EncodeRecord(record, payload, frame.data());
      bytes += frame;
    };
    append(TestHeader());
    LaunchRecord launch;
    launch.accesses = kTwo;
    launch.access_modes = modes;
    append(launch);
    if (patch_last != 0) bytes.back() = static_cast<char>(patch_last);
    append(EndRecord{9, 2, 0});
    return bytes;
  };
  static const uint8_t kGood[] = {kAccessRead, kAccessReadWrite};
  auto reader = TraceReader::FromBytes("good.trace", trace_with(kGood, 0));
  ASSERT_TRUE(reader.ok()) << reader.status();
  Record record;
  absl::StatusOr<bool> more = (*reader)->Next(&record);
  ASSERT_TRUE(more.ok() && *more) << more.status();
  const auto& launch = std::get<LaunchRecord>(record);
  ASSERT_EQ(launch.access_modes.size(), 2u);
  EXPECT_EQ(launch.access_modes[1], kAccessReadWrite);

  static const uint8_t kOne[] = {kAccessWrite};
  reader = TraceReader::FromBytes("short.trace", trace_with(kOne, 0));
  ASSERT_TRUE(reader.ok());
  more = (*reader)->Next(&record);
  ASSERT_FALSE(more.ok());
  EXPECT_TRUE(absl::StrContains(more.status().message(), "short.trace: corrupt trace at byte "))
      << more.status();
  EXPECT_TRUE(absl::StrContains(more.status().message(), "access modes do not match"))
      << more.status();

  reader = TraceReader::FromBytes("range.trace", trace_with(kGood, 4));
  ASSERT_TRUE(reader.ok());
  more = (*reader)->Next(&record);
  ASSERT_FALSE(more.ok());
  EXPECT_TRUE(absl::StrContains(more.status().message(), "access mode out of range"))
      << more.status();
}

// A gzip-compressed trace reads as the trace inside; broken gzip data is one line naming the file.
TEST(TraceFormat, AGzipCompressedTraceReadsAsItsContents) {
  TempPath plain("plain.trace"), packed("packed.trace.gz"), cut("cut.trace.gz");
  const std::vector<Record> expected = WriteEveryKind(plain.path());
  auto raw = testing::ReadFile(plain.path());
  {
    gzFile gz = gzopen(packed.path().c_str(), "wb");
    ASSERT_NE(gz, nullptr);
    ASSERT_EQ(gzwrite(gz, raw.data(), static_cast<unsigned>(raw.size())),
              static_cast<int>(raw.size()));
    ASSERT_EQ(gzclose(gz), Z_OK);
  }
  auto a = testing::ReadAllEncoded(plain.path());
  auto b = testing::ReadAllEncoded(packed.path());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(b->size(), expected.size());

  const std::string gz_bytes = testing::ReadFile(packed.path());
  testing::WriteFile(cut.path(), gz_bytes.substr(0, gz_bytes.size() / 2));
  auto reader = TraceReader::Open(cut.path());
  ASSERT_FALSE(reader.ok());
  EXPECT_TRUE(absl::StartsWith(reader.status().message(), cut.path() + ": truncated gzip data"))
      << reader.status();
  std::string garbled = gz_bytes;
  for (size_t i = 20; i < garbled.size() - 8; i += 7) garbled[i] = static_cast<char>(~garbled[i]);
  testing::WriteFile(cut.path(), garbled);
  reader = TraceReader::Open(cut.path());
  ASSERT_FALSE(reader.ok());
  EXPECT_TRUE(absl::StartsWith(reader.status().message(), cut.path() + ": ")) << reader.status();
}

}  // namespace
}  // namespace spillway::trace
